"""Catching the twins up with the journal before a worker reads an inbox partition: no fact twice.

Why it is needed: the actor appends a batch's facts to the journal, then writes the batch's twins (the
changelog), and only then commits the inbox offsets (entrypoints/inbox.py). A worker killed between the
append and the commit leaves facts in the journal that its successor's twins, restored from the changelog,
do not know, and whose requests the successor reads again. Deciding them again would append the same facts
a second time (same ids, same versions, after later versions of other devices): duplicates in a journal
the contract says holds every fact once, per device in version order.

How: every inbox commit carries, as its metadata, the journal's end offset for the partition with the
same number. The journal and the inbox are co-partitioned by device id, and the worker holding an inbox
partition is the only writer of that journal partition, so every fact before that offset came from batches
(and deadline ticks) whose twins were flushed to the changelog before the commit. A worker that takes
a partition over reads the journal from there to its end and folds every fact newer than its twin into
the table. A partition no commit names yet (a fresh stack, or a worker killed before its first commit)
is caught up from the journal partition's start (entrypoints/inbox.py). A request read again then finds
its command known, its report's seq seen, its device registered: ``decide`` records nothing for it.
Nothing is appended twice, and no transaction is needed on the hot path.

What it does not cover: a worker that is paused (not killed) past its session and then wakes up still
holding a batch is not fenced off; it would append that batch after its successor took over. Kafka
transactions with a transactional id per inbox partition would fence it, at a cost per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, TopicPartition

from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.events import Event, MalformedRecord

log = logging.getLogger(__name__)


def journal_offset_metadata(offset: int) -> str:
    """The commit metadata that records the journal's end offset (see the module docstring)."""
    return f"journal:{offset}"


def journal_offset_from(metadata: str) -> int | None:
    """The journal offset an inbox commit recorded, or None (an older commit without one)."""
    prefix, _, offset = metadata.partition(":")
    return int(offset) if prefix == "journal" and offset.isdigit() else None


class JournalCatchUp:
    """Reads journal partitions from given offsets to their end and hands the facts to ``fold``."""

    def __init__(
        self,
        make_consumer: Callable[[], AIOKafkaConsumer],  # no group: it only reads, from given offsets
        journal_topic: str,
        fold: Callable[[list[Event]], int],  # folds facts into the twins; returns how many twins moved on
        *,
        batch_size: int = 5000,
    ) -> None:
        self.make_consumer = make_consumer
        self.journal_topic = journal_topic
        self.fold = fold
        self.batch_size = batch_size

    async def run(self, since: dict[int, int]) -> int:
        """Fold the facts from ``since`` (journal partition -> offset) to the end; returns how many twins
        moved on."""
        if not since:
            return 0
        consumer = self.make_consumer()
        await consumer.start()
        try:
            tps = [TopicPartition(self.journal_topic, p) for p in sorted(since)]
            consumer.assign(tps)
            ends: dict[TopicPartition, int] = await consumer.end_offsets(tps)
            left = {tp for tp in tps if ends[tp] > since[tp.partition]}
            for tp in left:
                consumer.seek(tp, since[tp.partition])
            folded = read = 0
            while left:
                fetched = await consumer.getmany(*left, timeout_ms=500, max_records=self.batch_size)
                events: list[Event] = []
                for tp, records in fetched.items():
                    for record in records:
                        if record.offset >= ends[tp]:
                            break
                        read += 1
                        try:
                            events.append(decode_fact(record.value))
                        except MalformedRecord as error:  # dead-lettered by the projector; not a fact
                            # this actor wrote (it checks every request first), so nothing to fold
                            log.warning("catch-up skips %s@%d: %s", tp, record.offset, error)
                folded += self.fold(events)
                for tp in list(left):
                    if await consumer.position(tp) >= ends[tp]:
                        left.discard(tp)
        finally:
            await consumer.stop()
        log.info("caught up with %d journal facts (%d twins were behind them)", read, folded)
        return folded
