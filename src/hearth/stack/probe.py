"""Health probes for the parts that serve no HTTP: ``python -m hearth.stack.probe device-actor|device-gateway|
projector``.

compose.yaml runs them as health checks (exit 0: healthy, 1: not, with the reason on stderr), so that
what waits for these services waits for them to work, not merely to have started:

- ``device-actor``: the workers' faust consumer group (``<app_id>-<topic prefix>``) is Stable with at
  least one member: some worker holds the twins' partitions and so reads the inbox.
- ``device-gateway``: the gateways' consumer group of the device-bound topic is Stable with at least one
  member: some gateway is connected and publishes dispatched commands to devices.
- ``projector``: the projector has consumed every journal partition up to ``--max-lag`` records of its
  end (its offsets are committed with the views, in PostgreSQL): it is keeping the views current.

Settings come from the same HEARTH_* variables as the services.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import psycopg
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from psycopg import sql

from hearth_shared.kafka import topic_partitions


async def stable_group(bootstrap_servers: str, group: str) -> str | None:
    """None if the consumer group ``group`` is Stable with at least one member, else why not."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        responses = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    for response in responses:
        described: dict[str, Any] = response.to_object()
        for g in described.get("groups", []):
            if g.get("group") == group and g.get("state") == "Stable" and g.get("members"):
                return None
    return f"the consumer group {group} has no stable member"


async def device_actor_group() -> str | None:
    """None if the device actor's consumer group has a stable member, else why not."""
    from hearth_device_actor.settings import DeviceActorSettings

    settings = DeviceActorSettings()
    group = f"{settings.app_id}-{settings.stack.topic_prefix}"
    return await stable_group(settings.stack.kafka_bootstrap_servers, group)


async def device_gateway_group() -> str | None:
    """None if the device gateways' consumer group has a stable member, else why not."""
    from hearth_device_gateway.settings import DeviceGatewaySettings

    settings = DeviceGatewaySettings()
    return await stable_group(settings.stack.kafka_bootstrap_servers, settings.kafka_group())


async def projector_lag(max_lag: int) -> str | None:
    """None if the projector is within ``max_lag`` records of the journal's end, else how far behind."""
    from hearth_read_models.settings import ReadModelSettings  # settings only: the probe stays light

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


CHECKS: dict[str, Callable[[list[str]], Coroutine[Any, Any, str | None]]] = {
    "device-actor": lambda _: device_actor_group(),
    "device-gateway": lambda _: device_gateway_group(),
    "projector": lambda argv: projector_lag(
        int(argv[argv.index("--max-lag") + 1]) if "--max-lag" in argv else 10_000
    ),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in CHECKS:
        usage = "usage: python -m hearth.stack.probe device-actor | device-gateway | projector [--max-lag N]"
        print(usage, file=sys.stderr)
        return 2
    try:
        problem = asyncio.run(asyncio.wait_for(CHECKS[argv[0]](argv[1:]), 20))
    except Exception as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
