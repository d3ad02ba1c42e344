"""``python -m hearth_campaigns``: run the campaign driver until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from hearth_campaigns.app import make_app
from hearth_campaigns.entrypoints.driver import CampaignDriver
from hearth_campaigns.settings import CampaignSettings


async def run_until_signalled(driver: CampaignDriver) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await driver.run(stop)


def main() -> None:
    settings = CampaignSettings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    asyncio.run(run_until_signalled(make_app(settings)))


if __name__ == "__main__":
    main()
