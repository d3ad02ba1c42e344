"""The device actor's composition root: ``make_app(settings, *, journal=None)`` builds the faust app.

One faust agent reads the inbox in batches (``take_events``).
The twins live in a faust table keyed by device_id whose changelog is partitioned by the same murmur2
key hash as the inbox (``TwinTable``), so the table stays co-partitioned with the inbox and the
journal, and the deadline timer can write it too. Records stay bytes through faust and are decoded
once, at the edge.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import faust
from aiokafka import AIOKafkaConsumer
from aiokafka.partitioner import murmur2
from mode import Service

from hearth_device_actor.actor import DeviceActors, InboxRecord
from hearth_device_actor.settings import DeviceActorSettings
from hearth_shared.events import DeviceCommand, Event, MalformedRecord, decode_model, encode
from hearth_shared.kafka import DeadLetters, KafkaJournal
from hearth_shared.topics import PARTITIONS

log = logging.getLogger(__name__)


def partition_of(key: bytes, partitions: int = PARTITIONS) -> int:
    """The partition Kafka's default partitioner (murmur2, as every Hearth producer uses) gives a key."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class TwinTable(faust.Table):  # type: ignore[misc]
    """The twins table, its changelog partitioned exactly like the inbox: by the device_id key's hash.

    faust would otherwise send a changelog write to the partition of the event being processed, which is
    wrong for every key but the last in a batch, and impossible from a timer.
    """

    def partition_for_key(self, key: bytes) -> int:
        return partition_of(key, self.partitions)


class KafkaOutbox:
    """Appends facts to the journal, dispatches commands to devices, dead-letters bad records."""

    def __init__(self, journal: KafkaJournal) -> None:
        self.journal = journal
        self.dead_letters = DeadLetters(journal, consumer="device-actor")

    async def send(self, events: list[Event], commands: list[DeviceCommand]) -> None:
        producer = self.journal.producer
        topic, commands_topic = self.journal.topics.journal, self.journal.topics.device_commands
        futures = [await producer.send(topic, encode(e), key=e.device_id.encode()) for e in events]
        futures += [
            await producer.send(commands_topic, encode(c), key=c.device_id.encode()) for c in commands
        ]
        await asyncio.gather(*futures)

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
        table_standby_replicas=0,  # with standbys, faust 0.15.3 lost changelog writes (see the recovery test)
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
    twins = app.tables.add(
        TwinTable(app, name="twins", default=None, partitions=PARTITIONS, key_type=bytes, value_type=bytes)
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
        # take_events acks a batch's records when the next batch is asked for: after handle_batch has
        # put their facts in the journal and their twins in the table.
        async for batch in stream.take_events(settings.batch_size, within=settings.batch_within_s):
            records = [
                InboxRecord(e.message.topic, e.message.partition, e.message.offset, e.message.key, e.value)
                for e in batch
            ]
            async with lock:
                await actors.handle_batch(records)

    @app.task
    async def dump_tasks_on_sigusr1() -> None:  # `kill -USR1 <pid>`: what every task is waiting on
        def dump() -> None:
            for task in asyncio.all_tasks():
                task.print_stack(limit=6, file=sys.stderr)

        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump)

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
