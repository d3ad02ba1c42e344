"""``python -m hearth_device_actor``: run one device-actor worker (no web server)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from hearth_device_actor.app import make_app
from hearth_device_actor.settings import DeviceActorSettings


def main() -> None:
    settings = DeviceActorSettings()
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    app = make_app(settings)
    sys.argv = [sys.argv[0], "worker", "--without-web", "--loglevel", settings.log_level]
    app.main()


if __name__ == "__main__":
    main()
