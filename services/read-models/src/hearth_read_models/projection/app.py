"""The projector's composition root: ``run_projector(settings)`` wires Kafka, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import logging
import time

from aiokafka import AIOKafkaConsumer
from redis.asyncio import Redis

from hearth_read_models.projection.journal_source import Batching, JournalSource
from hearth_read_models.projection.live_sink import LiveSink
from hearth_read_models.projection.projector import Projector
from hearth_read_models.projection.view_store import ViewStore
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.store.db import migrate
from hearth_shared.adapters.collector import collect_less_often
from hearth_shared.adapters.kafka import DeadLetters, KafkaWriter
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.stop_signals import stop_on_signals

log = logging.getLogger(__name__)


def make_consumer(stack: StackSettings) -> AIOKafkaConsumer:
    """The projector's consumer (also the floor of the rebuild bench): assigned partitions, no group,
    positions from PostgreSQL, and the earliest record when a position is gone from the log. Its fetches
    are not held at the broker (``hearth_shared.adapters.kafka.held_fetches`` says why)."""
    return AIOKafkaConsumer(
        bootstrap_servers=stack.kafka_bootstrap_servers,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
    )


async def run_projector(settings: ReadModelSettings, *, stop: asyncio.Event | None = None) -> None:
    stack = settings.stack
    began = time.monotonic()
    await asyncio.to_thread(migrate, stack.postgres_dsn, settings.schema_name)
    migrated = time.monotonic()
    redis = Redis.from_url(stack.redis_url)
    consumer = make_consumer(stack)
    journal = KafkaWriter(stack.kafka_bootstrap_servers, stack.topics, client_id="read-models-projector")
    await consumer.start()
    await journal.start()
    connected = time.monotonic()
    stop = stop or asyncio.Event()
    batching = Batching(settings.batch_size, settings.batch_wait_ms, settings.batch_linger_ms)
    projector = Projector(
        JournalSource(
            consumer,
            stack.topics.journal,
            rollups=stack.topics.rollups,
            home_journal=stack.topics.home_journal,
            batching=batching,
        ),
        ViewStore(stack.postgres_dsn, settings.schema_name, settings.consumer_name),
        LiveSink(redis),
        dead_letters=DeadLetters(journal, consumer="read-models-projector"),
    )
    try:
        await projector.start()
        # Where a start's time goes (a restart is timed to this point: `hearth bench restart`).
        log.info(
            "projector started in %.2f s: migrations %.2f s, Kafka %.2f s, positions %.2f s",
            time.monotonic() - began,
            migrated - began,
            connected - migrated,
            time.monotonic() - connected,
        )
        runner = asyncio.create_task(projector.run())
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        for task in (runner, stopper):
            task.cancel()
        await asyncio.gather(runner, stopper, return_exceptions=True)
        if runner in done:
            runner.result()  # a crash of the projector ends the process with its error
    finally:
        await projector.stop()
        await consumer.stop()
        await journal.stop()
        await redis.aclose()


def main() -> None:
    settings = ReadModelSettings()
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s %(message)s")
    collect_less_often()  # a few short-lived objects a record, big caches: see the module

    async def serve() -> None:
        await run_projector(settings, stop=stop_on_signals())

    asyncio.run(serve())
