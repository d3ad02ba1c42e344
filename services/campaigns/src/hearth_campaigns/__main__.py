"""``python -m hearth_campaigns``: run the campaign driver until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import logging

from hearth_campaigns.app import make_app
from hearth_campaigns.entrypoints.driver import CampaignDriver
from hearth_campaigns.settings import CampaignSettings
from hearth_shared.adapters.stop_signals import stop_on_signals


async def run_until_signalled(driver: CampaignDriver) -> None:
    await driver.run(stop_on_signals())


def main() -> None:
    settings = CampaignSettings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    asyncio.run(run_until_signalled(make_app(settings)))


if __name__ == "__main__":
    main()
