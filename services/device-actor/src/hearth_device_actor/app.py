"""The device actor's composition root: ``make_app(settings, *, journal=None)`` builds the faust app.

One faust agent reads the inbox in batches (``take_events``, each record acked by hand once settled).
The twins live in a faust table keyed by device_id whose changelog is partitioned by the same murmur2
key hash as the inbox (``use_partitioner``), so the table stays co-partitioned with the inbox and the
journal, and the deadline timer can write it too. Records stay bytes through faust and are decoded
once, at the edge.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

import faust
from aiokafka import AIOKafkaConsumer
from mode import Service

from hearth_device_actor.actor import DeviceActors, InboxRecord
from hearth_device_actor.settings import DeviceActorSettings
from hearth_shared.events import DeviceCommand, Event, MalformedRecord, decode_model, encode
from hearth_shared.kafka import DeadLetters, KafkaJournal
from hearth_shared.topics import PARTITIONS

log = logging.getLogger(__name__)


class KafkaOutbox:
    """Appends facts to the journal, dispatches commands to devices, dead-letters bad records."""

    def __init__(self, journal: KafkaJournal) -> None:
        self.journal = journal
        self.dead_letters = DeadLetters(journal, consumer="device-actor")

    async def send(self, events: list[Event], commands: list[DeviceCommand]) -> Awaitable[None]:
        producer = self.journal.producer
        topic, commands_topic = self.journal.topics.journal, self.journal.topics.device_commands
        futures = [await producer.send(topic, encode(e), key=e.device_id.encode()) for e in events]
        futures += [
            await producer.send(commands_topic, encode(c), key=c.device_id.encode()) for c in commands
        ]
        return asyncio.gather(*futures)

    async def dead_letter(self, record: InboxRecord, error: Exception) -> None:
        await self.dead_letters.send(
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            key=record.key,
            value=record.value,
            error=error,
        )


def make_app(
    settings: DeviceActorSettings | None = None, *, journal: KafkaJournal | None = None
) -> faust.App:
    settings = settings or DeviceActorSettings()
    stack = settings.stack
    topics = stack.topics
    journal = journal or KafkaJournal(stack.kafka_bootstrap_servers, topics, client_id="device-actor")
    app = faust.App(
        f"{settings.app_id}-{stack.topic_prefix}",
        broker=f"kafka://{stack.kafka_bootstrap_servers}",
        store="memory://",
        datadir=settings.data_dir,
        topic_partitions=PARTITIONS,
        topic_allow_declare=True,
        topic_disable_leader=True,
        web_enabled=False,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(1.0, settings.session_timeout_s / 4),
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        broker_commit_interval=0.5,
        table_cleanup_interval=3600.0,
        stream_buffer_maxsize=max(4096, settings.batch_size * 2),
        consumer_max_fetch_size=4 * 1024 * 1024,
        broker_max_poll_records=settings.batch_size,
        broker_request_timeout=max(30.0, settings.session_timeout_s * 4),
        logging_config=None,
    )

    inbox = app.topic(
        topics.inbox,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=PARTITIONS,
    )
    twins = app.Table(
        "twins",
        default=None,
        partitions=PARTITIONS,
        key_type=bytes,
        value_type=bytes,
        use_partitioner=True,
    )
    actors = DeviceActors(twins, KafkaOutbox(journal), offline_after_s=settings.offline_after_s)
    lock = asyncio.Lock()

    @app.service
    class JournalProducer(Service):  # started with the worker, stopped with it
        async def on_start(self) -> None:
            await journal.start()

        async def on_stop(self) -> None:
            await journal.stop()

    @app.service
    class ModelFeed(Service):  # every worker reads every model version (no consumer group)
        async def on_start(self) -> None:
            self.consumer = AIOKafkaConsumer(
                topics.models,
                bootstrap_servers=stack.kafka_bootstrap_servers,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            await self.consumer.start()

        async def on_stop(self) -> None:
            await self.consumer.stop()

        @Service.task
        async def _follow(self) -> None:
            async for record in self.consumer:
                try:
                    actors.use_model(decode_model(record.value))
                except MalformedRecord as error:
                    log.warning("ignoring an unreadable model record at offset %d: %s", record.offset, error)

    @app.agent(inbox)
    async def device_agents(stream: faust.StreamT[bytes]) -> None:
        # noack: an inbox record is acked (so its offset may be committed) only once its facts are in the
        # journal and its twin in the table; until then the next batches go on (see actor.py).
        async for batch in stream.noack().take_events(settings.batch_size, within=settings.batch_within_s):
            records = [
                InboxRecord(e.message.topic, e.message.partition, e.message.offset, e.message.key, e.value)
                for e in batch
            ]

            def ack(events: list[faust.EventT[bytes]] = batch) -> None:
                for event in events:
                    event.ack()

            async with lock:
                await actors.handle_batch(records, on_settled=ack)

    ticks = 0

    @app.timer(interval=settings.tick_interval_s)
    async def deadlines() -> None:
        nonlocal ticks
        ticks += 1
        async with lock:
            if ticks % 60 == 1:  # after start-up and now and then: rebuild from recovered twins
                actors.rescan()
            await actors.tick()
        if ticks % 20 == 0 and actors.batches:
            log.info(
                "handled %d inbox records in %d batches (%.0f per batch); %d twins with deadlines",
                actors.processed,
                actors.batches,
                actors.processed / actors.batches,
                len(actors.deadlines),
            )

    app.actors = actors  # type: ignore[attr-defined]  # for benchmarks and tests in-process
    return app
