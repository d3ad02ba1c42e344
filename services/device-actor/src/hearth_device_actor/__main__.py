"""``python -m hearth_device_actor``: run one device-actor worker (no web server)."""

from __future__ import annotations

import asyncio
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hearth_device_actor.app import declare_changelog, make_app
from hearth_device_actor.settings import DeviceActorSettings


def main() -> None:
    settings = DeviceActorSettings()
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    app = make_app(settings)
    with ThreadPoolExecutor(1) as pool:  # its own event loop: faust makes and keeps the main thread's
        pool.submit(asyncio.run, declare_changelog(app, settings.stack)).result()
    sys.argv = [sys.argv[0], "worker", "--without-web", "--loglevel", settings.log_level]
    app.main()


if __name__ == "__main__":
    main()
