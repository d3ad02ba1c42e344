"""The home journal's Kafka adapter: append a home fact (keyed by home_id), and follow topics from their
first offset into an in-memory fold (``TopicFollower``), as the APIs and the automations service do.

A record a follower cannot read is logged and skipped with its reason (``on_record`` raising counts as
that too): one bad record never stops a feed. ``caught_up`` is set once every partition was read to the
end offsets seen at start-up; /healthz waits for it, so a restarted process never answers from half a fold.

``after_poll`` (optional) is awaited after each poll's records were handed to ``on_record``, before the
feed counts them as read: a consumer that batches its writes per poll flushes there. It raising is not a
bad record but a failed sink: the feed stops, and ``wait_caught_up`` and ``failure`` report it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from hearth_shared.home_facts import HomeFact, encode_home_fact
from hearth_shared.kafka import topic_partitions
from hearth_shared.topics import Topics

log = logging.getLogger(__name__)

OnRecord = Callable[[str, int, int, bytes | None], Awaitable[None]]
AfterPoll = Callable[[], Awaitable[None]]


async def append_home_fact(producer: AIOKafkaProducer, topics: Topics, fact: HomeFact) -> None:
    """Append one fact; returns once the broker has it (acks=all)."""
    await append_home_facts(producer, topics, (fact,))


async def append_home_facts(producer: AIOKafkaProducer, topics: Topics, facts: Iterable[HomeFact]) -> None:
    """Append facts in their order (a home's facts share a partition); returns once the broker has every
    one (acks=all), raises if one could not be written."""
    futures = [
        await producer.send(topics.home_journal, encode_home_fact(f), key=f.home_id.encode()) for f in facts
    ]
    await asyncio.gather(*futures)


class TopicFollower:
    """Reads topics from their first offset, then follows them, handing each record to ``on_record``."""

    def __init__(
        self,
        bootstrap_servers: str,
        topics: list[str],
        on_record: OnRecord,
        name: str,
        *,
        after_poll: AfterPoll | None = None,
        max_records: int = 5000,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topics = topics
        self.on_record = on_record
        self.after_poll = after_poll
        self.max_records = max_records
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

    def failure(self) -> BaseException | None:
        """Why the feed stopped (``after_poll`` raised), or None while it runs."""
        task = self._task
        if task is None or not task.done() or task.cancelled():
            return None
        return task.exception()

    async def wait_caught_up(self) -> None:
        """Until ``caught_up``; raises what stopped the feed if it stopped first."""
        if self._task is None:
            raise RuntimeError(f"{self.name}: start() has not been awaited")
        waiting = asyncio.ensure_future(self.caught_up.wait())
        try:
            await asyncio.wait({waiting, self._task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if not self.caught_up.is_set():
            failure = self.failure()
            raise RuntimeError(f"{self.name} stopped before it caught up") from failure

    async def stop(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
            failure = self.failure()  # reported already to whoever watched the feed
            if failure is not None:
                log.warning("%s had stopped: %r", self.name, failure)
        if self._consumer is not None:
            await self._consumer.stop()

    async def _run(self, consumer: AIOKafkaConsumer, pending: dict[object, int]) -> None:
        if not pending:
            self.caught_up.set()
        while True:
            batches = await consumer.getmany(timeout_ms=200, max_records=self.max_records)
            for records in batches.values():
                for record in records:
                    try:
                        await self.on_record(record.topic, record.partition, record.offset, record.value)
                    except Exception:
                        self.skipped += 1
                        log.exception(
                            "%s skips %s[%d]@%d", self.name, record.topic, record.partition, record.offset
                        )
            if self.after_poll is not None and batches:
                await self.after_poll()
            for tp, records in batches.items():
                if tp in pending and records and records[-1].offset + 1 >= pending[tp]:
                    del pending[tp]
                    if not pending:
                        log.info("%s caught up", self.name)
                        self.caught_up.set()
