"""``python -m hearth_device_actor``: run one device-actor worker (no web server)."""

from __future__ import annotations

import asyncio
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hearth_device_actor.app import declare_changelog, make_app
from hearth_device_actor.settings import DeviceActorSettings
from hearth_shared.adapters.collector import collect_less_often, freeze_started_state


def main() -> None:
    settings = DeviceActorSettings()
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    collect_less_often()  # the twins it holds and the batches in hand: see the module
    app = make_app(settings)
    freeze_started_state()  # faust, aiokafka and the app's modules
    with ThreadPoolExecutor(1) as pool:  # its own event loop: faust makes and keeps the main thread's
        pool.submit(asyncio.run, declare_changelog(app, settings.stack)).result()
    sys.argv = [sys.argv[0], "worker", "--without-web", "--loglevel", settings.log_level]
    app.main()


if __name__ == "__main__":
    main()
