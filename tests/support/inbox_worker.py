"""One device-actor worker's hot path (``InboxFeed`` and ``DeviceActors``) on the real broker, in the
test's process, with a plain dict as its changelog: for tests that crash it exactly (test_journal_once)
or look at what it does with a backlog (test_command_lane). ``submit`` puts requests on their lanes, as
every writer does (``Topics.lane_of``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer

from hearth_device_actor.adapters.catch_up import JournalCatchUp
from hearth_device_actor.adapters.kafka_outbox import KafkaOutbox
from hearth_device_actor.entrypoints.inbox import InboxFeed, inbox_consumer
from hearth_device_actor.service.actor import DeviceActors
from hearth_device_actor.settings import DeviceActorSettings
from hearth_shared.adapters.kafka import KafkaWriter, make_producer
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.topics import PARTITIONS
from hearth_shared.schema.events import Inbound, encode
from tests.support.waiting import eventually


class Worker:
    """One device-actor worker's hot path on the real broker, with a plain dict as its changelog."""

    def __init__(
        self,
        settings: StackSettings,
        twins: dict[bytes, bytes],
        *,
        catch_up: bool,
        batch_size: int = 500,
        coalesce_after: int = 0,
        commit_interval_s: float = 3600,  # commits only when the test says so
        recommit_after_s: float = 3600,
        check_commands_s: float = DeviceActorSettings().check_commands_ms / 1000,
    ) -> None:
        self.journal = KafkaWriter(settings.kafka_bootstrap_servers, settings.topics, client_id="once")
        self.actors = DeviceActors(
            twins, KafkaOutbox(self.journal), offline_after_s=3600, check_commands_s=check_commands_s
        )
        servers = settings.kafka_bootstrap_servers
        reader = JournalCatchUp(
            lambda: AIOKafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False),
            settings.topics.journal,
            self.actors.catch_up,
        )
        waits = DeviceActorSettings()
        self.feed = InboxFeed(
            lambda: inbox_consumer(servers, f"once-{settings.topic_prefix}"),
            settings.topics.inbox_lanes,
            self.actors.handle_batch,
            _nothing_to_flush,
            asyncio.Lock(),
            batch_size=batch_size,
            coalesce_after=coalesce_after,
            fetch_waits_ms=(waits.fetch_wait_ms, waits.idle_fetch_wait_ms),
            commit_interval_s=commit_interval_s,
            recommit_after_s=recommit_after_s,
            journal_topic=settings.topics.journal,
            catch_up=reader.run if catch_up else _no_catch_up,
        )
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.journal.start()
        await self.feed.assign(set(range(PARTITIONS)))
        self.task = asyncio.create_task(self.feed.run())

    async def handled(self, count: int) -> None:
        await eventually(
            lambda: self.actors.processed >= count, f"{count} requests handled", shown=self.where_it_stands
        )

    def where_it_stands(self) -> dict[str, object]:
        """Requests handled, and per partition with records: the offset it is handled (or committed) to,
        and the broker's end as of the last fetch (a wait that times out says which partition is stuck)."""
        consumer = self.feed.consumer
        offsets = self.feed.committed | self.feed.handled
        partitions = {
            f"{tp.topic.rsplit('.', 1)[-1]}-{tp.partition}": (offsets.get(tp), end)
            for tp in sorted(consumer.assignment())
            if (end := consumer.highwater(tp))
        }
        task = self.task
        if task is None or not task.done():
            reading = "not started" if task is None else "running"
        else:
            reading = "cancelled" if task.cancelled() else f"ended: {task.exception()!r}"
        return {
            "handled": self.actors.processed,
            "assigned": self.feed.serving,
            "reading": reading,
            "partitions": partitions,
        }

    async def commit(self) -> None:
        await self.feed.revoke()  # commits what was handled (with the journal offsets) and stops reading
        await self.feed.assign(set(range(PARTITIONS)))

    async def crash(self) -> None:
        """Stop with no commit and no goodbye, like kill -9 right after the facts were appended."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.feed.consumer.stop()
        await self.journal.stop()

    async def stop(self) -> None:
        await self.crash()


async def _nothing_to_flush() -> None:
    return None


async def _no_catch_up(since: dict[int, int]) -> int:
    return 0


async def submit(settings: StackSettings, requests: Sequence[Inbound]) -> None:
    producer = make_producer(settings.kafka_bootstrap_servers, "once-fleet")
    await producer.start()
    try:
        for request in requests:
            lane = settings.topics.lane_of(request)
            await producer.send(lane, encode(request), key=request.device_id.encode())
        await producer.flush()
    finally:
        await producer.stop()
