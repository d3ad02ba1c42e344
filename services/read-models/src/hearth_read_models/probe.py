"""``python -m hearth_read_models.probe [--max-lag N]``: healthy when the projector has consumed every
journal partition up to N records (default 10,000) of its end. Its offsets are committed with the views
in PostgreSQL, so this says the views are being kept current. compose.yaml runs it as the projector's
health check."""

from __future__ import annotations

import sys

import psycopg
from aiokafka import AIOKafkaConsumer
from psycopg import sql

from hearth_read_models.settings import ReadModelSettings
from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.adapters.probe import run_probe


async def projector_lag_problem(max_lag: int) -> str | None:
    """None if the projector is within ``max_lag`` records of the journal's end, else how far behind."""
    settings = ReadModelSettings()
    stack = settings.stack
    dsn = stack.postgres_dsn.replace("postgresql+psycopg://", "postgresql://", 1)
    async with await psycopg.AsyncConnection.connect(dsn, connect_timeout=10) as conn:
        query = sql.SQL(
            "SELECT partition, next_offset FROM {}.consumed_offsets WHERE consumer = %s AND topic = %s"
        ).format(sql.Identifier(settings.schema_name))
        cursor = await conn.execute(query, (settings.consumer_name, stack.topics.journal))
        consumed = {row[0]: row[1] for row in await cursor.fetchall()}
    consumer = AIOKafkaConsumer(bootstrap_servers=stack.kafka_bootstrap_servers)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(await topic_partitions(consumer, stack.topics.journal))
    finally:
        await consumer.stop()
    lag = sum(max(0, end - consumed.get(tp.partition, 0)) for tp, end in ends.items())
    return None if lag <= max_lag else f"the projector is {lag} journal records behind (limit {max_lag})"


if __name__ == "__main__":
    argv = sys.argv[1:]
    max_lag = int(argv[argv.index("--max-lag") + 1]) if "--max-lag" in argv else 10_000
    sys.exit(run_probe(lambda: projector_lag_problem(max_lag)))
