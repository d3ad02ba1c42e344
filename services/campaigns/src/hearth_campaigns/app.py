"""The campaign driver's composition root: ``make_app(settings)`` builds the ``CampaignDriver``; nothing
connects until ``run`` (``python -m hearth_campaigns`` runs it until SIGINT or SIGTERM)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from hearth_campaigns.entrypoints.driver import CampaignDriver
from hearth_campaigns.settings import CampaignSettings
from hearth_shared.schema.events import utcnow


def make_app(settings: CampaignSettings, *, clock: Callable[[], datetime] = utcnow) -> CampaignDriver:
    """The driver, not connected yet (``await driver.run(stop)`` connects and drives)."""
    return CampaignDriver(settings, clock=clock)
