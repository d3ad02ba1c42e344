"""The home journal's Kafka adapter: append a home fact (keyed by home_id), and follow topics from their
first offset into an in-memory fold (``TopicFollower``), as the APIs and the automations service do.

A record a follower cannot read is logged and skipped with its reason (``on_record`` raising counts as
that too): one bad record never stops a feed. ``caught_up`` is set once every partition was read to the
end offsets seen at start-up; /healthz waits for it, so a restarted process never answers from half a fold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from hearth_shared.home_facts import HomeFact, encode_home_fact
from hearth_shared.kafka import topic_partitions
from hearth_shared.topics import Topics

log = logging.getLogger(__name__)

OnRecord = Callable[[str, int, int, bytes | None], Awaitable[None]]


async def append_home_fact(producer: AIOKafkaProducer, topics: Topics, fact: HomeFact) -> None:
    """Append one fact; returns once the broker has it (acks=all)."""
    await producer.send_and_wait(topics.home_journal, encode_home_fact(fact), key=fact.home_id.encode())


class TopicFollower:
    """Reads topics from their first offset, then follows them, handing each record to ``on_record``."""

    def __init__(self, bootstrap_servers: str, topics: list[str], on_record: OnRecord, name: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topics = topics
        self.on_record = on_record
        self.name = name
        self.caught_up = asyncio.Event()
        self.skipped = 0
        self._task: asyncio.Task[None] | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        consumer = self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        partitions = [tp for topic in self.topics for tp in await topic_partitions(consumer, topic)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = {tp: end for tp, end in (await consumer.end_offsets(partitions)).items() if end > 0}
        self._task = asyncio.create_task(self._run(consumer, ends), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()

    async def _run(self, consumer: AIOKafkaConsumer, pending: dict[object, int]) -> None:
        if not pending:
            self.caught_up.set()
        while True:
            batches = await consumer.getmany(timeout_ms=200, max_records=5000)
            for tp, records in batches.items():
                for record in records:
                    try:
                        await self.on_record(record.topic, record.partition, record.offset, record.value)
                    except Exception:
                        self.skipped += 1
                        log.exception(
                            "%s skips %s[%d]@%d", self.name, record.topic, record.partition, record.offset
                        )
                if tp in pending and records and records[-1].offset + 1 >= pending[tp]:
                    del pending[tp]
                    if not pending:
                        log.info("%s caught up", self.name)
                        self.caught_up.set()
