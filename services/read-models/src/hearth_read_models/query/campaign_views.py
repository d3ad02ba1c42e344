"""``GET /v1/campaigns`` on the query API (admin tokens only, 403 for a home token): every firmware
campaign, newest first, with its status and each wave's job counts; the live page's campaign panel
draws it.

Where the query side reads campaigns from (a decision; ../shared/CONTRACT.md is silent): the campaigns
topic, folded in memory by each query-API process with ``hearth_shared.adapters.campaign_feed`` (the very fold
and view the command API's ``GET /v1/campaigns[/{id}]`` use), restored from the feed's snapshot and
followed live from the snapshot's position. Not a PostgreSQL table written by the projector, because:

* the campaigns are small beside the journal (a campaign's facts are one per device and step, and
  ``fold_campaign`` folds a 10,000-device wave in one pass), like the home journal that
  ``schedule_views`` already folds in memory the same way;
* the fold's snapshot (on the compacted snapshots topic, shared by every process of both APIs) bounds a
  restart by the campaigns, not by the topic's age, with no rebuild, verify or swap of its own (a
  projected table would need all three to keep "replaying rebuilds every view" true);
* the query side then imports neither the projector nor the command API: only hearth_shared.

When the campaigns outgrow memory, the next step is a ``campaigns`` table projected with its offsets in
the projector's transaction, served by this same route.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request

from hearth_shared.adapters.campaign_feed import CampaignFeed, campaign_view
from hearth_shared.schema.campaign_events import CampaignStatus
from hearth_shared.web.http import CurrentPrincipal, require_admin
from hearth_shared.web.http_errors import error_responses


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    stack = app.state.settings.stack
    feed = app.state.campaign_feed = CampaignFeed(stack)
    await feed.start()
    try:
        yield
    finally:
        await feed.stop()


router = APIRouter(prefix="/v1", lifespan=_lifespan)


@router.get(
    "/campaigns",
    summary="Every firmware campaign, newest first, with each wave's job counts (admin)",
    description="What the live page's campaign panel draws; per-device detail is the command API's "
    "`GET /v1/campaigns/{id}`.",
    responses=error_responses(401, 403, 413),
)
async def list_campaign_views(
    principal: CurrentPrincipal,
    request: Request,
    status: Annotated[CampaignStatus | None, Query(description="Only campaigns in this status")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    require_admin(principal, "see campaigns")
    feed: CampaignFeed = request.app.state.campaign_feed
    campaigns = sorted(feed.campaigns.values(), key=lambda c: c.started_at, reverse=True)
    chosen = [c for c in campaigns if status is None or c.status == status][:limit]
    return {"campaigns": [campaign_view(c, devices=False) for c in chosen]}
