"""Where a projector's records come from: the journal's partitions (all, or one share of them), the
rollups topic and the home journal, assigned to one consumer (no group: the positions live in PostgreSQL
with the rows), read in batches.

A share (k, n) is the journal's partitions p with p % n == k: a rebuild's replay is split so over
processes; a device's facts are all in one partition, so each share's twins, commands and alerts are its
own. Rollups and the home journal are read only by a source that is given their topics (the live
projector, and a replay's main process: never a share).

``RecordSource`` is what a projector needs of a source; the other one is
``rebuild.archive_source.ArchiveSource`` (a rebuild from the journal's archive).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from hearth_shared.adapters.kafka import topic_partitions

Record: TypeAlias = ConsumerRecord[bytes, bytes]
Records: TypeAlias = dict[TopicPartition, list[Record]]  # a batch, in offset order per partition
Offsets: TypeAlias = dict[TopicPartition, int]


@dataclass(frozen=True)
class Batching:
    """Up to ``size`` records a batch: ``wait_ms`` for the first ones, then what comes within
    ``linger_ms`` of them (a backlog fills the batch at once; a live trickle is held that long, so a
    busy journal costs a transaction per linger, not one per few facts)."""

    size: int = 5000
    wait_ms: int = 50
    linger_ms: int = 0


class RecordSource(Protocol):
    """Where a projector's records come from: partitions it is given, positions it can be set to, and
    batches in offset order per partition (the positions are the next offsets, as a consumer's)."""

    journal: str
    home_journal: str | None  # its records are home facts (None: this source does not read it)
    tps: list[TopicPartition]

    async def assign(self) -> list[TopicPartition]: ...

    def seek(self, positions: Offsets) -> None: ...

    async def position(self, tp: TopicPartition) -> int: ...

    async def reached(self, stop_at: Offsets) -> bool: ...

    async def fetch(self, stop_at: Offsets | None) -> Records: ...


class JournalSource:
    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        journal: str,
        *,
        rollups: str | None = None,
        home_journal: str | None = None,
        batching: Batching = Batching(),
        share: tuple[int, int] = (0, 1),
    ) -> None:
        self.consumer = consumer
        self.journal = journal
        self.topics = [journal, *[topic for topic in (rollups, home_journal) if topic]]
        self.home_journal = home_journal
        self.batching = batching
        self.share = share
        self.tps: list[TopicPartition] = []

    async def assign(self) -> list[TopicPartition]:
        """Take the partitions of this source's share (again, after ``share`` changed)."""
        k, n = self.share
        self.tps = [
            tp
            for topic in self.topics
            for tp in await topic_partitions(self.consumer, topic)
            if topic != self.journal or tp.partition % n == k
        ]
        self.consumer.assign(self.tps)
        return self.tps

    def seek(self, positions: Offsets) -> None:
        for tp in self.tps:
            self.consumer.seek(tp, positions.get(tp, 0))

    async def position(self, tp: TopicPartition) -> int:
        position: int = await self.consumer.position(tp)
        return position

    async def reached(self, stop_at: Offsets) -> bool:
        """Has every partition been read up to ``stop_at`` (what follows is not projected)?"""
        for tp in self.tps:
            if await self.consumer.position(tp) < stop_at.get(tp, 0):
                return False
        return True

    async def fetch(self, stop_at: Offsets | None) -> Records:
        """The next batch (see ``Batching``), never past ``stop_at``; empty when nothing came."""
        loop = asyncio.get_running_loop()
        size = self.batching.size
        records: Records = {}
        count, timeout_ms, until = 0, self.batching.wait_ms, 0.0
        while count < size:
            fetched = await self.consumer.getmany(timeout_ms=timeout_ms, max_records=size - count)
            for tp, rs in fetched.items():
                if stop_at is not None and rs and rs[-1].offset >= (end := stop_at.get(tp, 0)):
                    rs = [r for r in rs if r.offset < end]
                if rs:
                    records.setdefault(tp, []).extend(rs)
                    count += len(rs)
            if not count:
                break
            until = until or loop.time() + self.batching.linger_ms / 1000
            left = until - loop.time()
            if not fetched and left <= 0:  # nothing more at hand, and the linger is over
                break
            timeout_ms = max(0, round(left * 1000))
        return records
