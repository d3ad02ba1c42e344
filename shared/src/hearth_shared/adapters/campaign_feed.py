"""The APIs' view of the firmware campaigns: the campaigns topic folded (``CampaignBook``, the same fold
the driver uses), and a campaign as ``GET /v1/campaigns[/{id}]`` shows it. The command API (its campaign
routes) and the query API (the live page's campaign panel, hearth_read_models.query.campaign_views) both fold
it with this one class, so both show a campaign alike.

Followed with ``TopicFollower`` and restarted from a snapshot (``SnapshotPolicy`` named
``campaign-feed``): the book's state and the campaigns topic's position it reflects, on the compacted
snapshots topic, saved every minute (or 500,000 records) while facts come and at a clean stop. Why a
snapshot and not the first offset: a campaign is a fact per device and step, so the topic grows with every
wave ever run while the state grows only with the campaigns; and a snapshot is what keeps a campaign
visible once a retention window passed its facts. Every process of both APIs folds the topic alike, so
they share the one name (whichever saved last is as good as the others'). ``caught_up`` is set once
every partition was read to the end offsets seen at start-up; the driver is the topic's one writer, so
the view is the driver's state a moment later. A record it cannot read is logged and skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from typing import Any

from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.snapshots import SnapshotStore
from hearth_shared.adapters.topic_follower import TopicFollower, snapshot_policy
from hearth_shared.domain.campaign import Campaign, FirmwareCatalog
from hearth_shared.domain.campaign_book import CampaignBook
from hearth_shared.domain.campaign_gates import wave_sizes
from hearth_shared.schema.campaign_events import JOB_STATES, CampaignFact, decode_campaign_fact
from hearth_shared.schema.events import MalformedRecord

log = logging.getLogger(__name__)


SNAPSHOT_NAME = "campaign-feed"


class CampaignFeed:
    """The campaigns topic followed (``TopicFollower``, from its snapshot) and folded once per poll."""

    def __init__(self, stack: StackSettings, *, snapshot_store: SnapshotStore | None = None) -> None:
        self.book = CampaignBook()
        self.changed = asyncio.Condition()
        self._polled: list[CampaignFact] = []
        self.follower = TopicFollower(
            stack.kafka_bootstrap_servers,
            [stack.topics.campaigns],
            self._on_record,
            SNAPSHOT_NAME,
            after_poll=self._fold,
            snapshots=snapshot_policy(stack, SNAPSHOT_NAME, self.book, store=snapshot_store),
        )
        self.caught_up = self.follower.caught_up

    @property
    def campaigns(self) -> dict[str, Campaign]:
        return self.book.campaigns

    @property
    def catalog(self) -> FirmwareCatalog:
        return self.book.catalog

    async def start(self) -> None:
        await self.follower.start()

    async def stop(self) -> None:
        await self.follower.stop()

    async def _on_record(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        try:
            self._polled.append(decode_campaign_fact(value))
        except MalformedRecord as bad:
            log.warning("skipping campaign fact at offset %d: %s", offset, bad)

    async def _fold(self) -> None:
        polled, self._polled = self._polled, []
        self.book.fold(polled)  # one fold per campaign and poll (fold_campaign)
        async with self.changed:
            self.changed.notify_all()

    async def wait_for(self, campaign_id: str, timeout_s: float) -> Campaign | None:
        """The campaign, waiting up to ``timeout_s`` for it to appear (just requested)."""
        async with self.changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.changed.wait_for(lambda: campaign_id in self.campaigns), timeout_s
                )
        return self.campaigns.get(campaign_id)


def campaign_view(campaign: Campaign, *, devices: bool = True) -> dict[str, Any]:
    """A campaign as the API shows it: status, per wave, per device."""
    sizes = wave_sizes(len(campaign.order), campaign.waves)
    waves, start = [], 0
    for i, (percent, size) in enumerate(zip(campaign.waves, sizes, strict=True)):
        ids = campaign.order[start : start + size]
        start += size
        if i < len(campaign.waves_passed):
            state = "passed"
        elif i == campaign.wave:
            state = "aborted" if campaign.status == "aborted" else "running"
        else:
            state = "queued"
        counts = Counter(campaign.jobs[d].state for d in ids)
        waves.append(
            {
                "wave": i,
                "percent": percent,
                "size": size,
                "state": state,
                "jobs": {s: counts[s] for s in JOB_STATES if counts[s]},
                "health": campaign.waves_passed[i] if i < len(campaign.waves_passed) else None,
            }
        )
    totals = Counter(job.state for job in campaign.jobs.values())
    view: dict[str, Any] = {
        "campaign_id": campaign.campaign_id,
        "status": campaign.status,
        "device_type": campaign.firmware.device_type,
        "version": campaign.firmware.version,
        "url": campaign.firmware.url,
        "sha256": campaign.firmware.sha256,
        "soak_s": campaign.soak_s,
        "job_timeout_s": campaign.job_timeout_s,
        "current_wave": campaign.wave,
        "started_at": campaign.started_at.isoformat(),
        "ended_at": campaign.ended_at.isoformat() if campaign.ended_at else None,
        "jobs": {s: totals[s] for s in JOB_STATES if totals[s]},
        "waves": waves,
        "abort": (
            {"reason": campaign.abort_reason, "health": campaign.abort_health}
            if campaign.status == "aborted"
            else None
        ),
    }
    if devices:
        view["devices"] = {
            job.device_id: {
                "state": job.state,
                "wave": job.wave,
                "reason": job.reason,
                "previous_version": job.previous_version,
                "rollback_to": job.rollback_to,
            }
            for job in campaign.jobs.values()
        }
    return view
