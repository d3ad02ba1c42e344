"""Rebuild and verify: replay the journal from its first offset into a fresh schema while the live
projector and the query API keep serving.

``rebuild``: replay into ``<live>_rebuild_<time>`` (migrated by Alembic), check it (row count and content
checksum per table against what the replay wrote), then swap it in. The swap holds the advisory lock the
live projector takes for every batch (``db.swap_lock``), so no batch runs meanwhile; under it the new
schema catches up exactly to the live projector's offsets, takes the next generation number, and the
schemas are renamed (live -> old, new -> live) and the old one dropped in one transaction. The live
projector's next batch sees the other generation and reloads its positions from the swapped-in schema,
so it goes on where the new views end: nothing lost, nothing twice. Still under the lock, the Redis twin
cache is rewritten for the twins whose view the rebuild changed, and a ``snapshot`` message is published
on their home channels; twins it did not change are not touched and nothing is published for them.

``verify``: replay into a scratch schema up to the live projector's offsets (exactly, under the lock),
take a snapshot of the live views at that moment and release the lock, compare every table row by row,
and drop the scratch schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import psycopg
from aiokafka import TopicPartition
from psycopg import sql
from redis.asyncio import Redis
from sqlalchemy import Table

from hearth_read_models import tables as t
from hearth_read_models.db import check_schema, connect, migrate, swap_lock
from hearth_read_models.projector import Batch, Projector, change_message, home_channel, twin_key
from hearth_read_models.service import make_consumer
from hearth_read_models.settings import ReadModelSettings

log = logging.getLogger(__name__)

# Per table, an order-free checksum: the sum over its rows of an integer made from each row's content,
# computed the same way in SQL (here) and in ``Tally`` (from what the replay wrote).
LOW60 = "('x' || right(replace({}::text, '-', ''), 15))::bit(60)::bigint"  # a UUID's last 60 bits
DIGEST = "('x' || left(md5({}), 16))::bit(64)::bigint"  # md5's first 64 bits, signed
CHECKSUMS = {
    "twins": DIGEST.format("device_id || ':' || version || ':' || md5(state)"),
    "device_events": LOW60.format("event_id") + " + version",
    "commands": DIGEST.format("command_id || ':' || status"),
    "alerts": LOW60.format("event_id"),
    "rollups": DIGEST.format("key"),
}
COMPARED = (t.twins, t.device_events, t.commands, t.alerts, t.rollups)
FOLLOW_ROUNDS = 20  # catch-up rounds before the swap takes the lock for the rest
MASK60 = (1 << 60) - 1


def digest(text: str) -> int:
    """``DIGEST`` in Python."""
    return int.from_bytes(hashlib.md5(text.encode()).digest()[:8], "big", signed=True)


@dataclass
class Tally:
    """What a replay wrote: the expected row count and checksum of every table. Cheap per row (the
    history and alerts are summed as they go; twins, commands and rollups are digested at the end)."""

    twins: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # device_id -> version, state
    commands: dict[str, str] = field(default_factory=dict)  # command_id -> status
    rollups: set[str] = field(default_factory=set)
    events: list[int] = field(default_factory=lambda: [0, 0])  # rows, checksum
    alerts: list[int] = field(default_factory=lambda: [0, 0])

    def add(self, batch: Batch) -> None:
        p = batch.projection
        for row in batch.twin_rows:
            self.twins[row[0]] = (row[4], row[7])  # TWIN_COLUMNS: version, state
        self.events[0] += len(p.history)
        self.events[1] += sum((row[2].int & MASK60) + row[1] for row in p.history)  # event_id, version
        self.alerts[0] += len(p.alerts)
        self.alerts[1] += sum(a[0].int & MASK60 for a in p.alerts)
        for command_id in p.changed_commands:
            self.commands[str(command_id)] = p.commands[command_id]["status"]
        for key, rollup in batch.rollups.items():
            if rollup is None:
                self.rollups.discard(key)
            else:
                self.rollups.add(key)

    def expected(self) -> dict[str, tuple[int, int]]:
        twins = (digest(f"{d}:{v}:{hashlib.md5(s).hexdigest()}") for d, (v, s) in self.twins.items())
        return {
            "twins": (len(self.twins), sum(twins)),
            "device_events": (self.events[0], self.events[1]),
            "commands": (len(self.commands), sum(digest(f"{c}:{s}") for c, s in self.commands.items())),
            "alerts": (self.alerts[0], self.alerts[1]),
            "rollups": (len(self.rollups), sum(map(digest, self.rollups))),
        }


@dataclass
class ReplayProgress:
    phase: str
    events: int  # records projected so far
    position: int  # sum over partitions of the next offset to read
    end: int  # sum of the end offsets
    elapsed_s: float

    @property
    def lag(self) -> int:
        return max(0, self.end - self.position)


ProgressCallback = Callable[[ReplayProgress], None]


@dataclass
class TableCheck:
    table: str
    rows: int
    expected_rows: int
    checksum: int
    expected_checksum: int

    @property
    def ok(self) -> bool:
        return (self.rows, self.checksum) == (self.expected_rows, self.expected_checksum)


@dataclass
class Difference:
    table: str
    key: str
    kind: str  # "missing" (the replay has it, live not), "unexpected" (live only), "differs"
    columns: list[str]


@dataclass
class RebuildResult:
    schema: str
    events: int
    replay_s: float
    checks: list[TableCheck]
    swapped: bool = False
    generation: int = 0
    swap_s: float = 0.0
    twins_refreshed: int = 0

    @property
    def events_per_s(self) -> float:
        return self.events / self.replay_s if self.replay_s else 0.0


@dataclass
class VerifyResult:
    events: int
    differences: list[Difference]
    counts: dict[str, int]  # differences per table (all of them; ``differences`` lists the first ones)


class RebuildFailed(RuntimeError):
    pass


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S")


class Replay:
    """A fresh schema, migrated, and a projector (``live=False``) filling it from the journal's start.
    The schema is dropped on exit unless ``keep`` was set (a swap took it)."""

    def __init__(
        self,
        settings: ReadModelSettings,
        schema: str,
        *,
        batch_size: int,
        on_progress: ProgressCallback | None,
    ) -> None:
        self.settings = settings
        self.schema = check_schema(schema)
        self.batch_size = batch_size
        self.on_progress = on_progress
        self.tally = Tally()
        self.keep = False
        self.phase = "replay"
        self.started = time.perf_counter()
        self.consumer = make_consumer(settings.stack)
        self.projector: Projector | None = None

    async def __aenter__(self) -> Replay:
        stack = self.settings.stack
        # A bounded job that makes few reference cycles: without the cyclic collector it runs a sixth
        # faster; the collector is back (and runs) when it ends.
        self.collecting = gc.isenabled()
        gc.disable()
        await asyncio.to_thread(migrate, stack.postgres_dsn, self.schema)
        async with await connect(stack.postgres_dsn, self.schema) as conn:  # built once, at the end
            await conn.execute("ALTER TABLE device_events DROP CONSTRAINT device_events_pkey")
        await self.consumer.start()
        self.projector = Projector(
            dsn=stack.postgres_dsn,
            schema=self.schema,
            consumer=self.consumer,
            journal=stack.topics.journal,
            rollups=stack.topics.rollups,
            dead_letters=None,  # the live projector sent them already
            name=self.settings.consumer_name,
            live=False,
            batch_size=self.batch_size,
            batch_wait_ms=200,
            on_commit=self.tally.add,
        )
        await self.projector.start()
        self.started = time.perf_counter()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.projector is not None:
            await self.projector.stop()
        await self.consumer.stop()
        if not self.keep:
            with contextlib.suppress(psycopg.Error):
                await drop_schema(self.settings.stack.postgres_dsn, self.schema)
        if self.collecting:
            gc.enable()
            gc.collect()

    async def index(self) -> None:
        """Build the history's primary key, left out while the bulk of the journal was replayed (one
        sorted build is cheaper than an index kept up row by row; a fact twice would fail it)."""
        async with await connect(self.settings.stack.postgres_dsn, self.schema) as conn:
            await conn.execute(
                "ALTER TABLE device_events ADD CONSTRAINT device_events_pkey PRIMARY KEY (device_id, version)"
            )

    @property
    def events(self) -> int:
        assert self.projector is not None
        return self.projector.stats.events + self.projector.stats.rollups

    async def end_offsets(self) -> dict[TopicPartition, int]:
        assert self.projector is not None
        ends: dict[TopicPartition, int] = await self.consumer.end_offsets(self.projector.tps)
        return ends

    async def run_to(self, stop_at: dict[TopicPartition, int], phase: str) -> None:
        """Project up to ``stop_at`` exactly, reporting progress meanwhile."""
        assert self.projector is not None
        self.phase = phase
        reporter = asyncio.create_task(self._report()) if self.on_progress else None
        try:
            await self.projector.run(stop_at=stop_at)
        finally:
            if reporter is not None:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter
                await self._report_once()

    async def _report(self) -> None:
        while True:
            await self._report_once()
            await asyncio.sleep(0.5)

    async def _report_once(self) -> None:
        assert self.projector is not None and self.on_progress is not None
        ends = await self.end_offsets()
        positions = [await self.consumer.position(tp) for tp in self.projector.tps]
        self.on_progress(
            ReplayProgress(
                self.phase,
                self.events,
                sum(positions),
                sum(ends.values()),
                time.perf_counter() - self.started,
            )
        )

    async def follow(self, conn: psycopg.AsyncConnection, live: str) -> None:
        """Catch up with the live projector until it is less than a batch ahead."""
        assert self.projector is not None
        for _ in range(FOLLOW_ROUNDS):
            target = await stored_offsets(conn, live, self.settings.consumer_name)
            behind = sum(max(0, o - self.projector.positions.get(tp, 0)) for tp, o in target.items())
            if behind < self.batch_size:
                return
            await self.run_to(target, "catching up with live")

    async def check(self) -> list[TableCheck]:
        """Row count and checksum of every view table against what the replay wrote."""
        expected = self.tally.expected()
        checks = []
        async with await connect(self.settings.stack.postgres_dsn, self.schema) as conn:
            for table, expression in CHECKSUMS.items():
                cur = await conn.execute(
                    sql.SQL("SELECT count(*), coalesce(sum({}), 0) FROM {}").format(
                        sql.SQL(expression), sql.Identifier(table)
                    )
                )
                rows, checksum = (await cur.fetchone()) or (0, 0)
                checks.append(TableCheck(table, rows, expected[table][0], int(checksum), expected[table][1]))
        return checks


async def stored_offsets(
    conn: psycopg.AsyncConnection, schema: str, consumer: str
) -> dict[TopicPartition, int]:
    cur = await conn.execute(
        sql.SQL("SELECT topic, partition, next_offset FROM {}.consumed_offsets WHERE consumer = %s").format(
            sql.Identifier(schema)
        ),
        (consumer,),
    )
    return {TopicPartition(topic, p): o for topic, p, o in await cur.fetchall()}


async def drop_schema(dsn: str, schema: str) -> None:
    async with await connect(dsn, "public") as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(check_schema(schema)))
        )


@contextlib.asynccontextmanager
async def swap_locked(settings: ReadModelSettings) -> Any:
    """A connection holding the swap lock of the live schema (a session lock: it outlives transactions)."""
    live = settings.schema_name
    async with await connect(settings.stack.postgres_dsn, live) as conn:
        await conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (swap_lock(live),))
        try:
            yield conn
        finally:
            with contextlib.suppress(psycopg.Error):
                await conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (swap_lock(live),))


async def rebuild(
    settings: ReadModelSettings,
    *,
    swap: bool = True,
    batch_size: int = 50_000,
    on_progress: ProgressCallback | None = None,
) -> RebuildResult:
    """Replay the journal into a fresh schema, check it, and (with ``swap``) swap it in."""
    stack, live = settings.stack, check_schema(settings.schema_name)
    await asyncio.to_thread(
        migrate, stack.postgres_dsn, live
    )  # a first rebuild may come before any projector
    async with Replay(
        settings, f"{live}_rebuild_{stamp()}", batch_size=batch_size, on_progress=on_progress
    ) as r:
        await r.run_to(await r.end_offsets(), "replay")
        async with await connect(stack.postgres_dsn, live) as conn:
            await r.follow(conn, live)
        await r.index()
        replay_s = time.perf_counter() - r.started
        result = RebuildResult(r.schema, r.events, replay_s, await r.check())
        if not all(c.ok for c in result.checks):
            raise RebuildFailed(f"the rebuilt views do not match what was replayed: {result.checks}")
        if swap:
            began = time.perf_counter()
            async with swap_locked(settings) as conn:
                await r.run_to(await stored_offsets(conn, live, settings.consumer_name), "swapping")
                changed = await _swap(conn, live, r.schema)
                r.keep = True  # it is the live schema now
                result.twins_refreshed = await _refresh_cache(stack.redis_url, changed)
                result.generation = await _generation(conn, live)
            result.swapped, result.swap_s = True, time.perf_counter() - began
    return result


async def _generation(conn: psycopg.AsyncConnection, schema: str) -> int:
    cur = await conn.execute(sql.SQL("SELECT generation FROM {}.meta").format(sql.Identifier(schema)))
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def _swap(conn: psycopg.AsyncConnection, live: str, new: str) -> list[tuple[Any, ...]]:
    """In one durable transaction: next generation, the twins whose view changes, rename, drop the old.
    Returns ``(device_id, home_id, version, view)`` of every changed twin (no view: it is gone)."""
    old = f"{live}_old_{stamp()}"
    ident = {"live": sql.Identifier(live), "new": sql.Identifier(new), "old": sql.Identifier(old)}
    async with conn.transaction():
        await conn.execute("SET LOCAL synchronous_commit = on")
        generation = await _generation(conn, live)
        await conn.execute(
            sql.SQL("UPDATE {new}.meta SET generation = %s").format(**ident), (generation + 1,)
        )
        cur = await conn.execute(
            sql.SQL(
                "SELECT coalesce(n.device_id, o.device_id), coalesce(n.home_id, o.home_id), n.version, n.view"
                " FROM {new}.twins n FULL JOIN {live}.twins o ON n.device_id = o.device_id"
                " WHERE n.view IS DISTINCT FROM o.view OR n.state IS DISTINCT FROM o.state"
            ).format(**ident)
        )
        changed = await cur.fetchall()
        await conn.execute(sql.SQL("ALTER SCHEMA {live} RENAME TO {old}").format(**ident))
        await conn.execute(sql.SQL("ALTER SCHEMA {new} RENAME TO {live}").format(**ident))
        await conn.execute(sql.SQL("DROP SCHEMA {old} CASCADE").format(**ident))
    log.info("swapped %s in as %s (generation %d); %d twins changed", new, live, generation + 1, len(changed))
    return changed


async def _refresh_cache(redis_url: str, changed: list[tuple[Any, ...]]) -> int:
    if not changed:
        return 0
    redis = Redis.from_url(redis_url)
    try:
        async with redis.pipeline(transaction=True) as pipe:
            for device_id, home_id, version, view in changed:
                if view is None:
                    pipe.delete(twin_key(device_id))
                    continue
                pipe.set(twin_key(device_id), msgspec.json.encode(view))
                pipe.publish(home_channel(home_id), change_message("snapshot", device_id, version, view))
            await pipe.execute()
    finally:
        await redis.aclose()
    return len(changed)


async def verify(
    settings: ReadModelSettings, *, batch_size: int = 50_000, on_progress: ProgressCallback | None = None
) -> VerifyResult:
    """Replay into a scratch schema up to the live offsets and compare every table with the live one."""
    stack, live = settings.stack, check_schema(settings.schema_name)
    async with Replay(
        settings, f"{live}_verify_{stamp()}", batch_size=batch_size, on_progress=on_progress
    ) as r:
        async with await connect(stack.postgres_dsn, live) as conn:
            await r.run_to(await stored_offsets(conn, live, settings.consumer_name), "replay")
            await r.follow(conn, live)
        await r.index()
        async with swap_locked(settings) as conn:
            await r.run_to(await stored_offsets(conn, live, settings.consumer_name), "replay")
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                await conn.execute("SELECT 1 FROM meta")  # the snapshot of the live views, taken here
                await conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (swap_lock(live),))
                differences, counts = [], {}
                for table in COMPARED:
                    found, total = await _compare(conn, table, live, r.schema)
                    differences += found
                    counts[table.name] = total
        return VerifyResult(r.events, differences, counts)


async def _compare(
    conn: psycopg.AsyncConnection, table: Table, live: str, scratch: str, limit: int = 200
) -> tuple[list[Difference], int]:
    keys = [c.name for c in table.primary_key.columns]
    others = [c.name for c in table.columns if c.name not in keys]
    col = sql.Identifier
    key_text = sql.SQL("concat_ws('/', {})").format(
        sql.SQL(", ").join(sql.SQL("coalesce(l.{0}, s.{0})::text").format(col(k)) for k in keys)
    )
    which = sql.SQL(", ").join(
        sql.SQL("CASE WHEN l.{0} IS DISTINCT FROM s.{0} THEN {1} END").format(col(c), sql.Literal(c))
        for c in others
    )
    query = sql.SQL(
        "SELECT {key}, CASE WHEN l.{k0} IS NULL THEN 'missing' WHEN s.{k0} IS NULL THEN 'unexpected'"
        " ELSE 'differs' END, array_remove(ARRAY[{which}]::text[], NULL), count(*) OVER ()"
        " FROM {live}.{t} l FULL JOIN {scratch}.{t} s ON {on}"
        " WHERE l.{k0} IS NULL OR s.{k0} IS NULL OR ({lc}) IS DISTINCT FROM ({sc})"
        " ORDER BY 1 LIMIT {limit}"
    ).format(
        key=key_text,
        k0=col(keys[0]),
        which=which,
        live=col(live),
        scratch=col(scratch),
        t=col(table.name),
        on=sql.SQL(" AND ").join(sql.SQL("l.{0} = s.{0}").format(col(k)) for k in keys),
        lc=sql.SQL(", ").join(sql.SQL("l.{}").format(col(c)) for c in others),
        sc=sql.SQL(", ").join(sql.SQL("s.{}").format(col(c)) for c in others),
        limit=sql.Literal(limit),
    )
    rows = await (await conn.execute(query)).fetchall()
    differences = [Difference(table.name, key, kind, list(columns)) for key, kind, columns, _ in rows]
    return differences, int(rows[0][3]) if rows else 0
