"""``python -m hearth_campaigns.probe``: healthy when the campaign driver's consumer group of the campaign
requests is Stable with a member, i.e. the driver caught up and takes requests. compose.yaml runs it as the
driver's health check."""

from __future__ import annotations

import sys

from hearth_campaigns.settings import CampaignSettings
from hearth_shared.adapters.probe import run_probe, stable_group


async def campaign_group_problem() -> str | None:
    settings = CampaignSettings()
    return await stable_group(settings.stack.kafka_bootstrap_servers, settings.consumer_group())


if __name__ == "__main__":
    sys.exit(run_probe(campaign_group_problem))
