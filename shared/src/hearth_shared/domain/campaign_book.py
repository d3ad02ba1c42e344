"""``CampaignBook``: the campaigns topic folded, each campaign's state and the firmware catalog, and its
snapshot format. The campaign driver (hearth_campaigns) and the APIs' ``CampaignFeed`` fold the topic
with this one class, so the driver and both APIs agree on every campaign.

``fold`` takes the facts of one poll (or of one append by the driver) and folds each campaign's facts in
one ``fold_campaign`` pass (a 10,000-device wave is 10,000 job facts: per-fact copies of the jobs would
make it quadratic). Folding is idempotent: a fact at or below its campaign's version changes nothing and
a firmware registration sets the same entry again, so a fold that is ahead of the positions it is saved
with (the driver folds its own facts as it records them, before it reads them back) reads the facts
between again harmlessly. A campaign fact before its campaign's start is logged and skipped: the fold
goes on.

The snapshot (``snapshot``/``restore``) is a ``CampaignBookSnapshot``: a format number, the campaigns (the
domain's own msgspec structs, encoded directly) and the registered firmware, as msgpack. A new release
that changes the shape adds a format and keeps reading the old ones: a snapshot may be all that is left
of campaign facts a retention window removed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import msgspec

from hearth_shared.domain.campaign import Campaign, FirmwareCatalog, fold_campaign, register_firmware
from hearth_shared.schema.campaign_events import CampaignFact, Firmware, FirmwareRegistered
from hearth_shared.schema.snapshot_format import SnapshotCodec

log = logging.getLogger(__name__)

CAMPAIGN_BOOK_FORMAT = 1


class CampaignBookSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    format: int = CAMPAIGN_BOOK_FORMAT
    campaigns: list[Campaign]
    firmware: list[Firmware]  # the catalog's values; its key is (device_type, version)


_CODEC = SnapshotCodec("campaign book", CampaignBookSnapshot, CAMPAIGN_BOOK_FORMAT)


class CampaignBook:
    """Every campaign by id, and the firmware catalog, as the campaigns topic says."""

    def __init__(self) -> None:
        self.campaigns: dict[str, Campaign] = {}
        self.catalog: FirmwareCatalog = {}

    def fold(self, facts: Iterable[CampaignFact]) -> None:
        by_campaign: dict[str, list[CampaignFact]] = {}
        for fact in facts:
            if isinstance(fact, FirmwareRegistered):
                register_firmware(self.catalog, fact)
            else:
                by_campaign.setdefault(fact.campaign_id, []).append(fact)
        for campaign_id, its in by_campaign.items():
            try:
                folded = fold_campaign(self.campaigns.get(campaign_id), its)
            except ValueError as bad:  # a fact before its campaign's start: the fold goes on
                log.warning("skipping campaign %s: %s", campaign_id, bad)
                continue
            if folded is not None:
                self.campaigns[campaign_id] = folded

    # ------------------------------------------------------------------------------------ snapshot

    def snapshot(self) -> bytes:
        return _CODEC.encode(
            CampaignBookSnapshot(
                campaigns=list(self.campaigns.values()), firmware=list(self.catalog.values())
            )
        )

    @classmethod
    def from_snapshot(cls, data: bytes) -> CampaignBook:
        """A book with the saved state; raises (``ValueError``, ``msgspec.DecodeError``) if unreadable."""
        saved = _CODEC.decode(data)
        book = cls()
        book.campaigns = {c.campaign_id: c for c in saved.campaigns}
        book.catalog = {(f.device_type, f.version): f for f in saved.firmware}
        return book

    def restore(self, data: bytes) -> None:
        """Replace the whole state with the saved one, or raise and leave it as it was."""
        book = CampaignBook.from_snapshot(data)
        self.campaigns, self.catalog = book.campaigns, book.catalog


__all__ = ["CAMPAIGN_BOOK_FORMAT", "CampaignBook", "CampaignBookSnapshot"]
