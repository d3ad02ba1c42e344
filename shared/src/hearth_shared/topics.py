"""Every Kafka topic Hearth uses, with its partition count and configs, in one place.

Topics are created explicitly (never auto-created by the broker) so that the journal, the inbox and the
device actor's changelog stay co-partitioned by device_id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PARTITIONS = 12  # journal, inbox and device-bound commands: all keyed by device_id, co-partitioned
FOREVER = "-1"


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Topics:
    """Topic names under one prefix (tests use a prefix each, so they never share a topic)."""

    prefix: str = "hearth"

    @property
    def journal(self) -> str:
        """Device facts, keyed by device_id, ordered per device by version. The source of truth."""
        return f"{self.prefix}.journal"

    @property
    def inbox(self) -> str:
        """Requests to the device actors: registrations, commands, device reports and acks."""
        return f"{self.prefix}.inbox"

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

    def specs(self) -> list[TopicSpec]:
        keep = {"retention.ms": FOREVER, "min.insync.replicas": "1"}
        compact = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "segment.ms": "600000"}
        return [
            TopicSpec(self.journal, PARTITIONS, keep),
            TopicSpec(self.inbox, PARTITIONS, keep),
            TopicSpec(self.device_commands, PARTITIONS, {"retention.ms": str(7 * 24 * 3600 * 1000)}),
            TopicSpec(self.models, 1, compact),
            TopicSpec(self.rollups, 6, compact),
            TopicSpec(self.dead_letters, 1, keep),
            TopicSpec(self.token_revocations, 1, compact),
        ]
