"""Every Kafka topic Hearth uses, with its partition count and configs, in one place.

Topics are created explicitly (never auto-created by the broker) so that the journal, the inbox's two
lanes and the device actor's changelog stay co-partitioned by device_id.

The inbox has two lanes (the contract's "Commands before telemetry"): ``command_lane`` carries every
request but a device's state report (registrations, commands, acks, availability, credentials,
quarantine), ``inbox`` carries the state reports (telemetry). A device actor owns partition p of both and
serves the command lane first, so a command never waits behind a flood of readings. ``lane_of`` is the
one rule every writer follows, with one exception: the report a device's ack carries (the state its
command left) follows its ack on the command lane (the gateway's ``InboxLanes.put_answer``). The actor
accepts any request on either lane (records written before the command lane existed are all on
``inbox``), so the rule may change without a migration.

Replication: every topic gets ``replication_factor`` replicas (``HEARTH_KAFKA_REPLICATION_FACTOR``: 1 on
one broker, 3 on the local 3-broker cluster) and ``min.insync.replicas`` of ``min_insync_replicas``: with
3 replicas, 2. Producers use acks=all, so a record the broker acknowledged is on two brokers, and one
broker may be down without stopping writes; with two down, writes stop (NotEnoughReplicas) rather than
keep a record on one disk only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hearth_shared.schema.inbox_requests import ReportState
from hearth_shared.schema.record_envelope import Inbound

PARTITIONS = 12  # journal, inbox lanes and device-bound commands: all keyed by device_id, co-partitioned
FOREVER = "-1"


def min_insync_replicas(replication_factor: int) -> int:
    """How many replicas must have a record before acks=all succeeds: 2 once there are 2 or more."""
    if replication_factor < 1:
        raise ValueError(f"replication factor must be at least 1, not {replication_factor}")
    return min(replication_factor, 2)


def replica_config(replication_factor: int) -> dict[str, str]:
    """The topic config that goes with a replication factor (also for faust's changelog topics)."""
    return {"min.insync.replicas": str(min_insync_replicas(replication_factor))}


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)
    replication_factor: int = 1


@dataclass(frozen=True)
class Topics:
    """Topic names under one prefix (tests use a prefix each, so they never share a topic)."""

    prefix: str = "hearth"
    replication_factor: int = 1
    journal_retention_ms: int | None = None  # None: keep for ever (see StackSettings.journal_retention_s)

    @property
    def journal(self) -> str:
        """Device facts, keyed by device_id, ordered per device by version. The source of truth."""
        return f"{self.prefix}.journal"

    @property
    def inbox(self) -> str:
        """The inbox's telemetry lane: device state reports, to the device actors."""
        return f"{self.prefix}.inbox"

    @property
    def command_lane(self) -> str:
        """The inbox's command lane: every other request to the device actors (registrations, commands,
        acks, availability, credentials, quarantine), served before the telemetry lane."""
        return f"{self.prefix}.command-lane"

    @property
    def inbox_lanes(self) -> tuple[str, str]:
        """Both lanes of the inbox, the one served first first."""
        return self.command_lane, self.inbox

    def lane_of(self, request: Inbound) -> str:
        """The lane a request travels on: telemetry for a state report, the command lane otherwise."""
        return self.inbox if isinstance(request, ReportState) else self.command_lane

    @property
    def device_commands(self) -> str:
        """Commands the actors dispatch to devices (what a gateway subscribes to)."""
        return f"{self.prefix}.device-commands"

    @property
    def models(self) -> str:
        """Anomaly model parameters, keyed by model name, compacted: the latest version per model."""
        return f"{self.prefix}.models"

    @property
    def rollups(self) -> str:
        """Windowed telemetry aggregates, keyed by window, compacted: a re-emitted window replaces."""
        return f"{self.prefix}.rollups"

    @property
    def dead_letters(self) -> str:
        """Records no consumer could read, with the reason; processing goes on without them."""
        return f"{self.prefix}.dead-letters"

    @property
    def token_revocations(self) -> str:
        """``token.revoked`` facts, keyed by token id, compacted: every revoked token, once, for ever."""
        return f"{self.prefix}.token-revocations"

    @property
    def snapshots(self) -> str:
        """Snapshots of what the parts fold from their topics (``hearth_shared.adapters.snapshots``),
        compacted: per fold its latest manifest and that snapshot's chunks; all of a fold's records in one
        partition."""
        return f"{self.prefix}.snapshots"

    def journal_retention(self) -> dict[str, str]:
        ms = self.journal_retention_ms
        return {"retention.ms": str(ms) if ms is not None else FOREVER}

    def journal_spec(self) -> TopicSpec:
        return next(s for s in self.specs() if s.name == self.journal)

    @property
    def home_journal(self) -> str:
        """Facts about homes (time zones, schedules, holds, transitions fired), keyed by home_id: a home's
        facts in one partition, in order (``hearth_shared.domain.home_facts``)."""
        return f"{self.prefix}.home-journal"

    @property
    def campaigns(self) -> str:
        """Firmware campaign facts (hearth_shared.schema.campaign_events), keyed by campaign id, ordered per
        campaign by version; the campaign driver is their one writer. A campaign's whole story."""
        return f"{self.prefix}.campaigns"

    @property
    def campaign_requests(self) -> str:
        """Requests to the campaign driver: register a firmware, start or abort a campaign."""
        return f"{self.prefix}.campaign-requests"

    def specs(self) -> list[TopicSpec]:
        keep = {"retention.ms": FOREVER}
        compact = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "segment.ms": "600000"}
        week = {"retention.ms": str(7 * 24 * 3600 * 1000)}
        snapshot_cleaning = {
            "segment.ms": "60000",
            "min.cleanable.dirty.ratio": "0.1",
            "delete.retention.ms": "60000",
        }
        rf, replicas = self.replication_factor, replica_config(self.replication_factor)
        return [
            TopicSpec(self.journal, PARTITIONS, self.journal_retention() | replicas, rf),
            # Requests are needed until the actor has decided them (seconds): a week covers an actor down
            # for days, and the inbox's disk does not grow with the platform's age (the facts are kept).
            TopicSpec(self.inbox, PARTITIONS, week | replicas, rf),
            TopicSpec(self.command_lane, PARTITIONS, week | replicas, rf),
            TopicSpec(self.device_commands, PARTITIONS, week | replicas, rf),
            TopicSpec(self.models, 1, compact | replicas, rf),
            TopicSpec(self.rollups, 6, compact | replicas, rf),
            TopicSpec(self.dead_letters, 1, keep | replicas, rf),
            TopicSpec(self.token_revocations, 1, compact | replicas, rf),
            TopicSpec(self.home_journal, PARTITIONS, keep | replicas, rf),
            TopicSpec(self.campaigns, 1, keep | replicas, rf),
            TopicSpec(self.campaign_requests, 1, keep | replicas, rf),
            # Snapshots replace each other: small segments and a low dirty ratio let compaction drop the
            # old ones soon, so loading one reads little more than the snapshot itself.
            TopicSpec(self.snapshots, PARTITIONS, compact | snapshot_cleaning | replicas, rf),
        ]
