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

A record the replay cannot project (undecodable, or a fact ``hearth_shared.storable`` says cannot be
stored) is skipped and counted (``RebuildResult.skipped``): the live projector dead-lettered it already,
and the live views skipped it too, so the rebuilt views still equal them and the rebuild completes.

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
import multiprocessing
import time
import traceback
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import psycopg
from aiokafka import AIOKafkaConsumer, TopicPartition
from psycopg import sql
from redis.asyncio import Redis
from sqlalchemy import JSON, Column, Table

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
# Processes sharing the bulk of a replay by journal partition: the fold is pure Python (one core per
# process), and PostgreSQL and the broker take their share of the cores too.
REPLAY_PROCESSES = 2
FOLLOW_ROUNDS = 20  # catch-up rounds before the swap takes the lock for the rest
INDEX_BUILD_MEMORY = "1GB"  # the history's key is sorted in memory
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

    def merge(self, other: Tally) -> None:
        """Add what another process's share of the replay wrote (its devices and commands are its own)."""
        self.twins |= other.twins
        self.commands |= other.commands
        self.rollups |= other.rollups
        self.events = [a + b for a, b in zip(self.events, other.events, strict=True)]
        self.alerts = [a + b for a, b in zip(self.alerts, other.alerts, strict=True)]

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
    index_s: float = 0.0  # of replay_s: building the history's primary key at the end
    skipped: int = 0  # records that could not be projected (dead letters), skipped

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
    The schema is dropped on exit unless ``keep`` was set (a swap took it).

    ``replay`` shares the bulk of the journal out by partition over ``processes`` processes (this one and
    spawned children, each with its own consumer, connection and transactions, offsets with rows); then
    this process's projector takes every partition again for the rest (catching up, the swap)."""

    def __init__(
        self,
        settings: ReadModelSettings,
        schema: str,
        *,
        batch_size: int,
        on_progress: ProgressCallback | None,
        processes: int = 1,
    ) -> None:
        self.settings = settings
        self.schema = check_schema(schema)
        self.batch_size = batch_size
        self.on_progress = on_progress
        self.processes = max(1, processes)
        self.tally = Tally()
        self.keep = False
        self.phase = "replay"
        self.started = time.perf_counter()
        self.consumer = make_consumer(settings.stack)
        self.projector: Projector | None = None
        self.tps: list[TopicPartition] = []  # every partition of the journal and the rollups
        self.shares: list[_Share] = []  # children started and not finished
        self.shared_events = 0  # records the finished children projected
        self.shared_skipped = 0  # records the finished children could not project

    async def __aenter__(self) -> Replay:
        # the children first: they take seconds to start (a fresh interpreter importing the projector)
        self.shares = [_Share(self, (k, self.processes)) for k in range(1, self.processes)]
        try:
            return await self._start()
        except BaseException:
            for share in self.shares:
                share.stop()
            raise

    async def _start(self) -> Replay:
        stack = self.settings.stack
        # A bounded job that makes few reference cycles: without the cyclic collector it runs a sixth
        # faster; the collector is back (and runs) when it ends.
        self.collecting = gc.isenabled()
        gc.disable()
        await asyncio.to_thread(migrate, stack.postgres_dsn, self.schema)
        async with await connect(stack.postgres_dsn, self.schema) as conn:  # built once, at the end
            await conn.execute("ALTER TABLE device_events DROP CONSTRAINT device_events_pkey")
        await self.consumer.start()
        self.projector = _projector(self.settings, self.schema, self.consumer, self.batch_size, True)
        self.projector.on_commit = self.tally.add
        await self.projector.start()
        self.tps = list(self.projector.tps)
        self.started = time.perf_counter()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for share in self.shares:
            share.stop()
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
            await conn.execute(f"SET maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")  # a sort in memory
            await conn.execute(
                "ALTER TABLE device_events ADD CONSTRAINT device_events_pkey PRIMARY KEY (device_id, version)"
            )

    @property
    def events(self) -> int:
        assert self.projector is not None
        stats = self.projector.stats
        return stats.events + stats.rollups + self.shared_events + sum(s.events for s in self.shares)

    @property
    def skipped(self) -> int:
        assert self.projector is not None
        return self.projector.stats.dead_letters + self.shared_skipped

    async def end_offsets(self) -> dict[TopicPartition, int]:
        ends: dict[TopicPartition, int] = await self.consumer.end_offsets(self.tps)
        return ends

    async def replay(self, stop_at: dict[TopicPartition, int]) -> None:
        """The bulk: up to ``stop_at`` exactly, the journal's partitions shared over the processes."""
        assert self.projector is not None
        if not self.shares:
            return await self.run_to(stop_at, "replay")
        self.projector.share = (0, self.processes)
        await self.projector.start()  # its share only
        async with self._reporting("replay"):
            for share in self.shares:
                share.go(stop_at)
            await self.projector.run(stop_at=stop_at)
            for share in list(self.shares):
                tally, events, skipped = await share.result()
                self.tally.merge(tally)
                self.shared_events += events
                self.shared_skipped += skipped
                self.shares.remove(share)
                share.stop()  # it has ended: reaped
        self.projector.share = (0, 1)
        await self.projector.start()  # every partition, from the offsets the shares committed

    async def run_to(self, stop_at: dict[TopicPartition, int], phase: str) -> None:
        """Project up to ``stop_at`` exactly, reporting progress meanwhile."""
        assert self.projector is not None
        async with self._reporting(phase):
            await self.projector.run(stop_at=stop_at)

    @contextlib.asynccontextmanager
    async def _reporting(self, phase: str) -> AsyncIterator[None]:
        self.phase = phase
        reporter = asyncio.create_task(self._report()) if self.on_progress else None
        try:
            yield
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
                sum(positions) + sum(s.position for s in self.shares),
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


def _projector(
    settings: ReadModelSettings,
    schema: str,
    consumer: AIOKafkaConsumer,
    batch_size: int,
    rollups: bool,
    share: tuple[int, int] = (0, 1),
) -> Projector:
    stack = settings.stack
    return Projector(
        dsn=stack.postgres_dsn,
        schema=schema,
        consumer=consumer,
        journal=stack.topics.journal,
        rollups=stack.topics.rollups if rollups else None,
        dead_letters=None,  # the live projector sent them already
        name=settings.consumer_name,
        live=False,
        batch_size=batch_size,
        batch_wait_ms=200,
        share=share,
    )


class _Share:
    """A spawned child process that replays one share of the journal's partitions (no rollups) into the
    replay's schema once ``go`` tells it where to stop (a share with no partition ends at once); it sends
    back its ``Tally`` and record count, or its error as text."""

    def __init__(self, replay: Replay, share: tuple[int, int]) -> None:
        context = multiprocessing.get_context("spawn")
        self.progress = context.Array("q", 2, lock=False)  # records projected, sum of committed offsets
        self.receiver, sender = context.Pipe(duplex=False)
        orders, self.sender = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_replay_share,
            args=(replay.settings, replay.schema, replay.batch_size, share, self.progress, orders, sender),
            name=f"hearth-replay-{share[0]}-of-{share[1]}",
            daemon=True,
        )
        self.process.start()
        sender.close()
        orders.close()

    def go(self, stop_at: dict[TopicPartition, int]) -> None:
        self.sender.send(stop_at)

    @property
    def events(self) -> int:
        return int(self.progress[0])

    @property
    def position(self) -> int:
        return int(self.progress[1])

    async def result(self) -> tuple[Tally, int, int]:
        outcome = await asyncio.to_thread(self._receive)
        if isinstance(outcome, str):
            raise RebuildFailed(f"{self.process.name} failed:\n{outcome}")
        tally, events, skipped = outcome
        return tally, events, skipped

    def _receive(self) -> Any:
        try:
            return self.receiver.recv()
        except EOFError:
            self.process.join()
            return f"it ended with exit code {self.process.exitcode} and no result"

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
        self.process.join()
        self.receiver.close()
        self.sender.close()


def _replay_share(
    settings: ReadModelSettings,
    schema: str,
    batch_size: int,
    share: tuple[int, int],
    progress: Any,
    orders: Any,
    sender: Any,
) -> None:
    """A child's part of a replay (see ``_Share``)."""
    gc.disable()
    try:
        stop_at = orders.recv()
        sender.send(asyncio.run(_project_share(settings, schema, batch_size, stop_at, share, progress)))
    except EOFError:
        pass  # the replay ended before it had work for this share
    except BaseException:
        sender.send(traceback.format_exc())
    finally:
        sender.close()


async def _project_share(
    settings: ReadModelSettings,
    schema: str,
    batch_size: int,
    stop_at: dict[TopicPartition, int],
    share: tuple[int, int],
    progress: Any,
) -> tuple[Tally, int, int]:
    tally = Tally()
    consumer = make_consumer(settings.stack)
    projector = _projector(settings, schema, consumer, batch_size, False, share)

    def committed(batch: Batch) -> None:
        tally.add(batch)
        progress[0], progress[1] = projector.stats.events, sum(projector.positions.values())

    projector.on_commit = committed
    await consumer.start()
    try:
        await projector.start()
        await projector.run(stop_at=stop_at)
    finally:
        await projector.stop()
        await consumer.stop()
    return tally, projector.stats.events, projector.stats.dead_letters


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
    processes: int = REPLAY_PROCESSES,
) -> RebuildResult:
    """Replay the journal into a fresh schema, check it, and (with ``swap``) swap it in."""
    stack, live = settings.stack, check_schema(settings.schema_name)
    await asyncio.to_thread(
        migrate, stack.postgres_dsn, live
    )  # a first rebuild may come before any projector
    async with Replay(
        settings,
        f"{live}_rebuild_{stamp()}",
        batch_size=batch_size,
        on_progress=on_progress,
        processes=processes,
    ) as r:
        await r.replay(await r.end_offsets())
        async with await connect(stack.postgres_dsn, live) as conn:
            await r.follow(conn, live)
        indexing = time.perf_counter()
        await r.index()
        done = time.perf_counter()
        result = RebuildResult(
            r.schema, r.events, done - r.started, await r.check(), index_s=done - indexing, skipped=r.skipped
        )
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
    settings: ReadModelSettings,
    *,
    batch_size: int = 50_000,
    on_progress: ProgressCallback | None = None,
    processes: int = REPLAY_PROCESSES,
) -> VerifyResult:
    """Replay into a scratch schema up to the live offsets and compare every table with the live one."""
    stack, live = settings.stack, check_schema(settings.schema_name)
    async with Replay(
        settings,
        f"{live}_verify_{stamp()}",
        batch_size=batch_size,
        on_progress=on_progress,
        processes=processes,
    ) as r:
        async with await connect(stack.postgres_dsn, live) as conn:
            await r.replay(await stored_offsets(conn, live, settings.consumer_name))
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
    others = [c for c in table.columns if c.name not in keys]
    col = sql.Identifier

    def value(alias: str, column: Column[Any]) -> sql.Composable:
        """A column of one side; json has no equality, so JSON columns are compared as jsonb."""
        cast = "::jsonb" if isinstance(column.type, JSON) else ""
        return sql.SQL("{}.{}{}").format(sql.Identifier(alias), col(column.name), sql.SQL(cast))

    key_text = sql.SQL("concat_ws('/', {})").format(
        sql.SQL(", ").join(sql.SQL("coalesce(l.{0}, s.{0})::text").format(col(k)) for k in keys)
    )
    which = sql.SQL(", ").join(
        sql.SQL("CASE WHEN {} IS DISTINCT FROM {} THEN {} END").format(
            value("l", c), value("s", c), sql.Literal(c.name)
        )
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
        lc=sql.SQL(", ").join(value("l", c) for c in others),
        sc=sql.SQL(", ").join(value("s", c) for c in others),
        limit=sql.Literal(limit),
    )
    rows = await (await conn.execute(query)).fetchall()
    differences = [Difference(table.name, key, kind, list(columns)) for key, kind, columns, _ in rows]
    return differences, int(rows[0][3]) if rows else 0
