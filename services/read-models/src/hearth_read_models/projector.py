"""The projector: reads the journal in batches and writes the views plus the consumed offsets in one
PostgreSQL transaction; the Redis twin cache and the per-home change channels are written (in one
MULTI) just before that transaction commits.

Exactly once into PostgreSQL: offsets live in the same transaction as the rows, and a restart seeks to
them. At least once into Redis, made harmless: a crash between the Redis MULTI and the commit replays
the batch, which sets the same twins again and publishes changes whose versions subscribers have seen
(they drop them).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import ConsumerRecord
from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from hearth_read_models import tables as t
from hearth_read_models.projection import Projection, command_ids, decode_twin, encode_twin
from hearth_shared.events import Event, MalformedRecord, decode_event
from hearth_shared.kafka import DeadLetters, topic_partitions

log = logging.getLogger(__name__)

_json = msgspec.json.Encoder()


def twin_key(device_id: str) -> str:
    return f"twin:{device_id}"


def home_channel(home_id: str) -> str:
    return f"home:{home_id}"


@dataclass
class ProjectorStats:
    events: int = 0
    batches: int = 0
    skipped: int = 0
    dead_letters: int = 0


class Projector:
    def __init__(
        self,
        *,
        engine: AsyncEngine,
        redis: Redis | None,
        consumer: AIOKafkaConsumer,
        topic: str,
        dead_letters: DeadLetters,
        name: str,
        batch_size: int = 5000,
        batch_wait_ms: int = 50,
        redis_prefix: str = "",
        on_batch: Callable[[ProjectorStats, dict[int, int]], None] | None = None,
    ) -> None:
        self.engine = engine
        self.redis = redis
        self.consumer = consumer
        self.topic = topic
        self.dead_letters = dead_letters
        self.name = name
        self.batch_size = batch_size
        self.batch_wait_ms = batch_wait_ms
        self.redis_prefix = redis_prefix
        self.on_batch = on_batch
        self.stats = ProjectorStats()
        self.positions: dict[int, int] = {}  # partition -> next offset projected into PostgreSQL
        self.caught_up = asyncio.Event()

    async def start(self) -> None:
        tps = await topic_partitions(self.consumer, self.topic)
        self.consumer.assign(tps)
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(t.consumed_offsets.c.partition, t.consumed_offsets.c.next_offset).where(
                    t.consumed_offsets.c.consumer == self.name, t.consumed_offsets.c.topic == self.topic
                )
            )
            stored = {int(p): int(o) for p, o in rows}
        for tp in tps:
            self.positions[tp.partition] = stored.get(tp.partition, 0)
            self.consumer.seek(tp, self.positions[tp.partition])
        log.info("projector %s starts at %s", self.name, self.positions)

    async def run(self, *, stop_at: dict[int, int] | None = None) -> None:
        """Project forever, or until every partition reached ``stop_at`` (a rebuild's target)."""
        while True:
            if stop_at is not None and all(self.positions.get(p, 0) >= o for p, o in stop_at.items()):
                return
            batch = await self.consumer.getmany(timeout_ms=self.batch_wait_ms, max_records=self.batch_size)
            records = [r for rs in batch.values() for r in rs]
            if records:
                await self.project(records)
            elif not self.caught_up.is_set():
                self.caught_up.set()

    async def project(self, records: list[ConsumerRecord[bytes, bytes]]) -> None:
        events: list[Event] = []
        for r in records:
            try:
                events.append(decode_event(r.value))
            except MalformedRecord as error:
                self.stats.dead_letters += 1
                await self.dead_letters.send(
                    topic=r.topic,
                    partition=r.partition,
                    offset=r.offset,
                    key=r.key,
                    value=r.value,
                    error=error,
                )
        offsets: dict[int, int] = {}
        for r in records:
            offsets[r.partition] = max(offsets.get(r.partition, 0), r.offset + 1)
        async with self.engine.begin() as conn:
            projection = Projection(twins=await self._load_twins(conn, {e.device_id for e in events}))
            projection.commands = await self._load_commands(conn, command_ids(events))
            for event in events:
                projection.apply(event)
            await self._write(conn, projection, offsets)
            if self.redis is not None:
                await self._publish(projection)
        self.positions.update(offsets)
        self.stats.events += len(records)
        self.stats.batches += 1
        self.stats.skipped += projection.skipped
        if self.on_batch:
            self.on_batch(self.stats, self.positions)

    async def _load_twins(self, conn: AsyncConnection, device_ids: set[str]) -> dict[str, Any]:
        if not device_ids:
            return {}
        rows = await conn.execute(
            select(t.twins.c.device_id, t.twins.c.state).where(t.twins.c.device_id.in_(device_ids))
        )
        return {device_id: decode_twin(state) for device_id, state in rows}

    async def _load_commands(self, conn: AsyncConnection, ids: set[uuid.UUID]) -> dict[uuid.UUID, Any]:
        if not ids:
            return {}
        rows = await conn.execute(select(t.commands).where(t.commands.c.command_id.in_(ids)))
        return {row.command_id: dict(row._mapping) for row in rows}

    async def _write(self, conn: AsyncConnection, p: Projection, offsets: dict[int, int]) -> None:
        if p.changed_twins:
            rows = []
            for device_id in p.changed_twins:
                twin = p.twins[device_id]
                assert twin is not None
                view = next(c.twin for c in reversed(p.changes) if c.device_id == device_id)
                rows.append(
                    {
                        "device_id": device_id,
                        "home_id": twin.home_id,
                        "device_type": twin.device_type,
                        "name": twin.name,
                        "version": twin.version,
                        "online": twin.online,
                        "view": view,
                        "state": encode_twin(twin),
                        "updated_at": twin.updated_at,
                    }
                )
            stmt = insert(t.twins)
            await conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[t.twins.c.device_id],
                    set_={
                        c: stmt.excluded[c]
                        for c in ("version", "online", "view", "state", "updated_at", "name")
                    },
                    where=t.twins.c.version < stmt.excluded.version,
                ),
                rows,
            )
        if p.history:
            await conn.execute(insert(t.device_events).on_conflict_do_nothing(), p.history)
        if p.changed_commands:
            stmt = insert(t.commands)
            await conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[t.commands.c.command_id],
                    set_={
                        c: stmt.excluded[c] for c in ("status", "reason", "message", "updated_at", "history")
                    },
                ),
                [p.commands[c] for c in p.changed_commands],
            )
        if p.alerts:
            await conn.execute(insert(t.alerts).on_conflict_do_nothing(), p.alerts)
        stmt = insert(t.consumed_offsets)
        await conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[
                    t.consumed_offsets.c.consumer,
                    t.consumed_offsets.c.topic,
                    t.consumed_offsets.c.partition,
                ],
                set_={"next_offset": stmt.excluded.next_offset},
            ),
            [
                {"consumer": self.name, "topic": self.topic, "partition": p_, "next_offset": o}
                for p_, o in offsets.items()
            ],
        )

    async def _publish(self, p: Projection) -> None:
        assert self.redis is not None
        async with self.redis.pipeline(transaction=True) as pipe:
            latest: dict[str, bytes] = {}
            for change in p.changes:
                message = _json.encode(
                    {
                        "type": "change",
                        "device_id": change.device_id,
                        "version": change.version,
                        "twin": change.twin,
                        "event": change.event,
                    }
                )
                pipe.publish(self.redis_prefix + home_channel(change.home_id), message)
                latest[change.device_id] = _json.encode(change.twin)
            for device_id, twin in latest.items():
                pipe.set(self.redis_prefix + twin_key(device_id), twin)
            await pipe.execute()
