"""The projector's composition root: ``run_projector(settings)`` wires Kafka, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import logging
import signal

from aiokafka import AIOKafkaConsumer
from redis.asyncio import Redis

from hearth_read_models.db import async_engine, migrate
from hearth_read_models.projector import Projector
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.kafka import DeadLetters, KafkaJournal

log = logging.getLogger(__name__)


async def run_projector(settings: ReadModelSettings, *, stop: asyncio.Event | None = None) -> None:
    stack = settings.stack
    await asyncio.to_thread(migrate, stack.postgres_dsn, settings.schema_name)
    engine = async_engine(stack.postgres_dsn, settings.schema_name)
    redis = Redis.from_url(stack.redis_url)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=stack.kafka_bootstrap_servers,
        enable_auto_commit=False,
        max_partition_fetch_bytes=4 * 1024 * 1024,
        fetch_max_bytes=32 * 1024 * 1024,
    )
    journal = KafkaJournal(stack.kafka_bootstrap_servers, stack.topics, client_id="read-models-projector")
    await consumer.start()
    await journal.start()
    stop = stop or asyncio.Event()
    try:
        projector = Projector(
            engine=engine,
            redis=redis,
            consumer=consumer,
            topic=stack.topics.journal,
            dead_letters=DeadLetters(journal, consumer="read-models-projector"),
            name=settings.consumer_name,
            batch_size=settings.batch_size,
            batch_wait_ms=settings.batch_wait_ms,
        )
        await projector.start()
        runner = asyncio.create_task(projector.run())
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        for task in (runner, stopper):
            task.cancel()
        if runner in done:
            runner.result()  # a crash of the projector ends the process with its error
    finally:
        await consumer.stop()
        await journal.stop()
        await redis.aclose()
        await engine.dispose()


def main() -> None:
    settings = ReadModelSettings()
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s %(message)s")

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_projector(settings, stop=stop)

    asyncio.run(serve())
