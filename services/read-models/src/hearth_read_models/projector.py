"""The projector: reads the journal (and the rollups topic) in batches and writes the views plus the
consumed offsets in one PostgreSQL transaction; the Redis twin cache and the per-home change channels are
written (in one MULTI) just before that transaction commits.

Exactly once into PostgreSQL: offsets live in the same transaction as the rows, and a (re)start seeks to
them. At least once into Redis, made harmless: a crash between the Redis MULTI and the commit replays the
batch, which sets the same twins again and publishes changes whose versions subscribers have seen (they
drop them).

The hot path, per batch: twins and commands come from in-memory caches (only ones not seen yet are read,
in the batch's transaction); twins, commands and rollups are COPYed into temporary staging tables and
moved with one ``INSERT ... ON CONFLICT`` per table; history (in PostgreSQL's binary COPY format: the
envelope as decoded, the fact's JSON as it came) and alerts are COPYed straight in. The version guard
makes the appends safe: a fact at or below its twin's version is never written again.

A replay (``live=False``, a rebuild's private schema) goes faster: it folds the next batch while the last
one is written, reads nothing it wrote itself (its caches hold it all), and writes its twins once per run
(or when ``MAX_DIRTY_TWINS`` of them changed) instead of every batch; nobody reads its schema before the
run ends, and a failed replay's schema is dropped.

Poison: a fact that decodes but cannot be stored (``hearth_shared.storable``: a NUL in a name, an id
off the pattern, a >64-bit integer), or whose projection raises, is a dead letter with its reason (a
replay counts and skips it: the live projector sent the letter), and the batch goes on without it.
Should PostgreSQL still refuse a live batch for its data (``psycopg.DataError``: a value the checks let
through), the batch is projected again record by record, and the record it refuses alone is a dead
letter (``refused_by_postgres``) whose offset is committed without rows: the projector never stops on it.

Generations: a rebuild builds a new schema and swaps it in (rebuild.py) while this projector runs. A live
projector takes the swap's advisory lock first in every batch transaction and then reads the schema's
``meta.generation``; when it is not the one it started from, the batch is dropped and the projector
reloads its positions (and empties its caches) from the schema that is live now.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import msgspec
import psycopg
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord
from psycopg import sql
from redis.asyncio import Redis

from hearth_read_models import tables as t
from hearth_read_models.db import connect, swap_lock
from hearth_read_models.projection import (
    ALERT_COLUMNS,
    HISTORY_COLUMNS,
    HISTORY_TYPES,
    ROLLUP_COLUMNS,
    TWIN_COLUMNS,
    Projection,
    command_ids,
    decode_twin,
    rollup_row,
    twin_row,
)
from hearth_shared.domain import Twin
from hearth_shared.events import TERMINAL_STATUSES, Event, MalformedRecord
from hearth_shared.kafka import DeadLetters, topic_partitions
from hearth_shared.storable import decode_fact

log = logging.getLogger(__name__)

_json = msgspec.json.Encoder()
COMMAND_COLUMNS = tuple(c.name for c in t.commands.columns)
MAX_CACHED_TWINS = 200_000  # beyond this the cache is emptied (and refilled from the views as needed)
MAX_DIRTY_TWINS = 100_000  # a replay writes its twins when this many changed, and when it stops
YIELD_EVERY = 2000  # records folded between two turns of the event loop (a write in flight goes on)

Record: TypeAlias = ConsumerRecord[bytes, bytes]
Records: TypeAlias = dict[TopicPartition, list[Record]]  # a batch, in offset order per partition


def tune_gc() -> None:
    """Collect cycles less often: a projector makes a few short-lived objects per record and keeps big
    caches, and with the default thresholds it spends a third of its time in the collector."""
    gc.set_threshold(50_000, 20, 100)


def twin_key(device_id: str) -> str:
    return f"twin:{device_id}"


def home_channel(home_id: str) -> str:
    return f"home:{home_id}"


def change_message(change_type: str, device_id: str, version: int, twin: Any, event: Any = None) -> bytes:
    """A message on a home channel: ``change`` (with the fact) or ``snapshot`` (a swap replaced the twin)."""
    message = {"type": change_type, "device_id": device_id, "version": version, "twin": twin}
    if change_type == "change":
        message["event"] = event
    return _json.encode(message)


@dataclass
class ProjectorStats:
    events: int = 0  # journal records read
    rollups: int = 0  # rollup records read
    batches: int = 0
    skipped: int = 0
    dead_letters: int = 0
    reloads: int = 0  # batches dropped because a swap changed the generation


@dataclass
class Batch:
    """What one committed batch wrote (for a rebuild's tally)."""

    projection: Projection
    rollups: dict[str, tuple[Any, ...] | None]  # by key; None: deleted (a tombstone)
    offsets: dict[TopicPartition, int]  # the next offset of each partition in the batch
    twin_rows: list[tuple[Any, ...]] = field(default_factory=list)  # the twins written with it


class Projector:
    """Projects ``journal`` (and ``rollups``) into ``schema``. ``live``: take the swap lock and check the
    generation in every batch, and publish to ``redis`` when given; a rebuild runs with ``live=False``
    (no lock, no subscribers, ``synchronous_commit=off`` until its swap, which commits durably) and
    without ``dead_letters`` (records it cannot project are counted and skipped). ``share`` (k, n): project
    only the journal partitions p with p % n == k (a rebuild's replay is split so over processes; a
    device's facts are all in one partition, so each share's twins, commands and alerts are its own)."""

    def __init__(
        self,
        *,
        dsn: str,
        schema: str,
        consumer: AIOKafkaConsumer,
        journal: str,
        rollups: str | None,
        dead_letters: DeadLetters | None,
        name: str,
        redis: Redis | None = None,
        redis_prefix: str = "",
        live: bool = True,
        batch_size: int = 5000,
        batch_wait_ms: int = 50,
        batch_linger_ms: int = 0,
        on_commit: Callable[[Batch], None] | None = None,
        share: tuple[int, int] = (0, 1),
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.consumer = consumer
        self.topics = [journal, *([rollups] if rollups else [])]
        self.journal = journal
        self.dead_letters = dead_letters
        self.name = name
        self.redis = redis
        self.redis_prefix = redis_prefix
        self.live = live
        self.batch_size = batch_size
        self.batch_wait_ms = batch_wait_ms
        self.batch_linger_ms = batch_linger_ms
        self.on_commit = on_commit
        self.share = share  # (k, n): of the journal, only the partitions p with p % n == k
        self.stats = ProjectorStats()
        self.tps: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int] = {}  # next offset projected into PostgreSQL
        self.generation = -1
        self.twins: dict[str, Twin] = {}
        self.commands: dict[uuid.UUID, dict[str, Any]] = {}
        self.complete = False  # the caches hold every twin and command of the schema: nothing to read
        self.dirty: set[str] = set()  # a replay's twins changed in memory and not written yet
        self._conn: psycopg.AsyncConnection | None = None
        self._writing: asyncio.Task[None] | None = None  # a replay's batch being written

    @property
    def conn(self) -> psycopg.AsyncConnection:
        if self._conn is None:
            raise RuntimeError("Projector.start() has not been awaited")
        return self._conn

    async def start(self) -> None:
        k, n = self.share
        self.tps = [
            tp
            for topic in self.topics
            for tp in await topic_partitions(self.consumer, topic)
            if topic != self.journal or tp.partition % n == k
        ]
        self.consumer.assign(self.tps)
        await self._load()
        log.info("projector %s starts at %s", self.name, self.describe())

    async def stop(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def describe(self) -> str:
        return (
            f"generation {self.generation}, {sum(self.positions.values())} records in, schema {self.schema}"
        )

    async def _load(self) -> None:
        """(Re)connect, read the generation and the positions, empty the caches, seek."""
        await self.stop()
        self._conn = await connect(self.dsn, self.schema)
        if not self.live:
            await self.conn.execute("SET synchronous_commit = off")
        for table in ("twins", "commands", "rollups"):
            await self.conn.execute(
                sql.SQL("CREATE TEMP TABLE {} (LIKE {}) ON COMMIT DELETE ROWS").format(
                    sql.Identifier(f"stage_{table}"), sql.Identifier(table)
                )
            )
        async with self.conn.transaction():
            self.generation = await self._generation()
            cur = await self.conn.execute(
                "SELECT topic, partition, next_offset FROM consumed_offsets WHERE consumer = %s", (self.name,)
            )
            stored = {TopicPartition(topic, p): o for topic, p, o in await cur.fetchall()}
            cur = await self.conn.execute("SELECT NOT EXISTS (SELECT FROM twins)")
            empty = bool((await cur.fetchone() or (False,))[0])
        self._forget()
        self.complete = empty and not self.live
        for tp in self.tps:
            self.positions[tp] = stored.get(tp, 0)
            self.consumer.seek(tp, self.positions[tp])

    async def _generation(self) -> int:
        row = await (await self.conn.execute("SELECT generation FROM meta")).fetchone()
        return int(row[0]) if row else 0

    async def reached(self, stop_at: dict[TopicPartition, int]) -> bool:
        """Has every partition been read up to ``stop_at`` (what follows is not projected)?"""
        for tp in self.tps:
            if await self.consumer.position(tp) < stop_at.get(tp, 0):
                return False
        return True

    async def run(self, *, stop_at: dict[TopicPartition, int] | None = None) -> None:
        """Project forever, or exactly up to ``stop_at`` (records from there on stay unread)."""
        try:
            while stop_at is None or not await self.reached(stop_at):
                records = await self._fetch(stop_at)
                if not records:
                    continue
                if self.live:
                    await self.project(records)
                else:  # a replay: the next batch is folded while the last one is written
                    batch = await self._prepare(records)
                    await self._flush()
                    self._writing = asyncio.create_task(self._commit(batch))
            await self._flush()
            if self.dirty:  # a replay's last twins: the schema is whole again
                await self._commit(Batch(Projection(self.twins, self.commands), {}, {}, self._dirty_rows()))
        finally:
            if self._writing is not None:  # failed or cancelled: the batch in flight is rolled back
                self._writing.cancel()
                with contextlib.suppress(BaseException):
                    await self._writing
                self._writing = None
            if stop_at is not None and self._conn is not None:
                for tp in self.tps:  # records fetched past stop_at are read again by the next run
                    self.consumer.seek(tp, self.positions[tp])

    async def _fetch(self, stop_at: dict[TopicPartition, int] | None) -> Records:
        """Up to ``batch_size`` records: waits ``batch_wait_ms`` for the first ones, then adds what comes
        within ``batch_linger_ms`` of them (a backlog fills the batch at once; a live trickle is held
        that long, so a busy journal costs a transaction per linger, not one per few facts)."""
        loop = asyncio.get_running_loop()
        records: Records = {}
        count, timeout_ms, until = 0, self.batch_wait_ms, 0.0
        while count < self.batch_size:
            fetched = await self.consumer.getmany(timeout_ms=timeout_ms, max_records=self.batch_size - count)
            for tp, rs in fetched.items():
                if stop_at is not None and rs and rs[-1].offset >= (end := stop_at.get(tp, 0)):
                    rs = [r for r in rs if r.offset < end]
                if rs:
                    records.setdefault(tp, []).extend(rs)
                    count += len(rs)
            if not count:
                break
            until = until or loop.time() + self.batch_linger_ms / 1000
            left = until - loop.time()
            if not fetched and left <= 0:  # nothing more at hand, and the linger is over
                break
            timeout_ms = max(0, round(left * 1000))
        return records

    async def _flush(self) -> None:
        """Wait for the batch in flight (a replay's) to commit; its error is raised here."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            await writing

    async def project(self, records: Records, *, refused: bool = False) -> None:
        """Project one batch in one transaction (or drop it and reload, if a swap came first).
        ``refused``: write only the batch's offsets (PostgreSQL refused its one record)."""
        try:
            async with self.conn.transaction():
                if self.live:
                    await self.conn.execute(
                        "SELECT pg_advisory_xact_lock(hashtext(%s))", (swap_lock(self.schema),)
                    )
                    if await self._generation() != self.generation:
                        raise _GenerationChanged
                if refused:
                    offsets = {tp: rs[-1].offset + 1 for tp, rs in records.items()}
                    batch = Batch(Projection(self.twins, self.commands), {}, offsets)
                else:
                    batch = await self._prepare(records)
                await self._write(batch)
                if self.redis is not None and self.live:
                    await self._publish(batch.projection)
        except _GenerationChanged:
            self.stats.reloads += 1
            await self._load()
            log.info("projector %s: a swap changed the views; continues from %s", self.name, self.describe())
            return
        except psycopg.DataError as error:
            self._forget()
            if refused or not self.live:
                raise
            await self._project_refused(records, error)
            return
        except BaseException:
            self._forget()
            raise
        self._committed(batch)

    async def _project_refused(self, records: Records, error: psycopg.DataError) -> None:
        """PostgreSQL refused the batch: project it record by record; the record it refuses alone is
        a dead letter, and only its offset is committed."""
        if sum(map(len, records.values())) == 1:
            [r] = [r for rs in records.values() for r in rs]
            log.error("PostgreSQL refused %s[%d]@%d: %s", r.topic, r.partition, r.offset, error)
            await self._dead_letter(r, MalformedRecord("refused_by_postgres", str(error)))
            await self.project(records, refused=True)
            return
        reloads = self.stats.reloads
        for tp, rs in records.items():
            for r in rs:
                if self.stats.reloads != reloads:
                    return  # a swap came in between: the positions were reloaded, the rest is read again
                await self.project({tp: [r]})

    async def _commit(self, batch: Batch) -> None:
        try:
            async with self.conn.transaction():
                await self._write(batch)
        except BaseException:
            self._forget()
            raise
        self._committed(batch)

    def _forget(self) -> None:
        """Empty the caches: they may be ahead of what was committed."""
        self.twins.clear()
        self.commands.clear()
        self.dirty.clear()
        self.complete = False

    def _committed(self, batch: Batch) -> None:
        self.positions.update(batch.offsets)
        self.stats.batches += 1
        self.stats.skipped += batch.projection.skipped
        if self.on_commit:
            self.on_commit(batch)
        if not self.complete:
            for command_id in batch.projection.changed_commands:
                if self.commands[command_id]["status"] in TERMINAL_STATUSES:
                    del self.commands[command_id]  # never changes again; read again if ever needed
        if len(self.twins) > MAX_CACHED_TWINS and not self.dirty:
            self._forget()

    async def _prepare(self, records: Records) -> Batch:
        """Decode the batch and fold it into the caches (yielding now and then to a write in flight)."""
        events: list[tuple[Record, Event]] = []
        rollups: dict[str, tuple[Any, ...] | None] = {}
        offsets = {tp: rs[-1].offset + 1 for tp, rs in records.items()}
        for tp, rs in records.items():
            await asyncio.sleep(0)  # a write in flight goes on
            if tp.topic != self.journal:
                self.stats.rollups += len(rs)
                for r in rs:
                    await self._rollup(r, rollups)
                continue
            self.stats.events += len(rs)
            for r in rs:
                try:
                    events.append((r, decode_fact(r.value)))  # decoded, and storable in the views
                except MalformedRecord as error:
                    await self._dead_letter(r, error)
        await self._load_missing([e for _, e in events])
        projection = Projection(self.twins, self.commands, live=self.live and self.redis is not None)
        for i, (r, event) in enumerate(events):
            if i % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a write in flight goes on
            try:
                projection.apply(event, r.value)
            except MalformedRecord as error:
                await self._dead_letter(r, error)
            except Exception as error:  # a fact the projection cannot fold changes nothing (see apply)
                log.exception("could not project %s[%d]@%d", r.topic, r.partition, r.offset)
                await self._dead_letter(r, MalformedRecord("projection_failed", repr(error)))
        if self.live:
            twins = [twin_row(self.twins[d]) for d in projection.changed_twins]
        else:
            self.dirty |= projection.changed_twins
            twins = self._dirty_rows() if len(self.dirty) >= MAX_DIRTY_TWINS else []
        return Batch(projection, rollups, offsets, twins)

    def _dirty_rows(self) -> list[tuple[Any, ...]]:
        rows = [twin_row(self.twins[d]) for d in self.dirty]
        self.dirty.clear()
        return rows

    async def _rollup(self, r: Record, rollups: dict[str, tuple[Any, ...] | None]) -> None:
        """A rollup record into ``rollups`` (by key; None: a tombstone deletes the row)."""
        try:
            if r.value is None:
                rollups[(r.key or b"").decode(errors="replace")] = None
            else:
                row = rollup_row(r.key, r.value)
                rollups[row[0]] = row
        except MalformedRecord as error:
            await self._dead_letter(r, error)

    async def _dead_letter(self, r: Record, error: MalformedRecord) -> None:
        self.stats.dead_letters += 1
        if self.dead_letters is None:  # a replay: the live projector sent it already
            log.info("skipped %s[%d]@%d: %s", r.topic, r.partition, r.offset, error)
            return
        await self.dead_letters.send(
            topic=r.topic, partition=r.partition, offset=r.offset, key=r.key, value=r.value, error=error
        )

    async def _load_missing(self, events: list[Event]) -> None:
        """Read the twins and commands of this batch that are not in the caches yet."""
        if self.complete:
            return  # a replay into an empty schema: all there is was written from these caches
        await self._flush()  # a replay's batch in flight, on the same connection
        devices = list({e.device_id for e in events} - self.twins.keys())
        if devices:
            cur = await self.conn.execute(
                "SELECT device_id, state FROM twins WHERE device_id = ANY(%s)", (devices,)
            )
            self.twins.update({device_id: decode_twin(state) for device_id, state in await cur.fetchall()})
        commands = list(command_ids(events) - self.commands.keys())
        if commands:
            cur = await self.conn.execute(
                sql.SQL("SELECT {} FROM commands WHERE command_id = ANY(%s)").format(
                    _columns(COMMAND_COLUMNS)
                ),
                (commands,),
            )
            for row in await cur.fetchall():
                self.commands[row[0]] = dict(zip(COMMAND_COLUMNS, row, strict=True))

    async def _write(self, batch: Batch) -> None:
        p = batch.projection
        await self._merge(
            "twins", TWIN_COLUMNS, batch.twin_rows, "device_id", "WHERE twins.version < EXCLUDED.version"
        )
        await self._copy("device_events", HISTORY_COLUMNS, p.history, HISTORY_TYPES)
        await self._copy("alerts", ALERT_COLUMNS, p.alerts)
        rows = [_command_row(self.commands[c]) for c in p.changed_commands]
        await self._merge("commands", COMMAND_COLUMNS, rows, "command_id")
        deleted = [key for key, row in batch.rollups.items() if row is None]
        if deleted:
            await self.conn.execute("DELETE FROM rollups WHERE key = ANY(%s)", (deleted,))
        await self._merge("rollups", ROLLUP_COLUMNS, [r for r in batch.rollups.values() if r], "key")
        await self._write_offsets(batch.offsets)

    async def _copy(
        self,
        table: str,
        columns: Sequence[str],
        rows: Sequence[tuple[Any, ...]],
        binary_types: Sequence[str] | None = None,
    ) -> None:
        """COPY ``rows`` in; in the binary format when their ``binary_types`` are given (no text to
        format here nor to parse there)."""
        if not rows:
            return
        statement = sql.SQL("COPY {} ({}) FROM STDIN{}").format(
            sql.Identifier(table),
            _columns(columns),
            sql.SQL(" (FORMAT BINARY)" if binary_types else ""),
        )
        async with self.conn.cursor() as cur, cur.copy(statement) as copy:
            if binary_types:
                copy.set_types(list(binary_types))
            for row in rows:
                await copy.write_row(row)

    async def _merge(
        self, table: str, columns: Sequence[str], rows: list[tuple[Any, ...]], key: str, where: str = ""
    ) -> None:
        """Insert or replace ``rows`` by ``key``: COPY into the staging table, then one INSERT."""
        if not rows:
            return
        await self._copy(f"stage_{table}", columns, rows)
        update = sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in columns if c != key
        )
        await self.conn.execute(
            sql.SQL(
                "INSERT INTO {t} ({c}) SELECT {c} FROM {s} ON CONFLICT ({k}) DO UPDATE SET {u} {w}"
            ).format(
                t=sql.Identifier(table),
                c=_columns(columns),
                s=sql.Identifier(f"stage_{table}"),
                k=sql.Identifier(key),
                u=update,
                w=sql.SQL(where),
            )
        )

    async def _write_offsets(self, offsets: dict[TopicPartition, int]) -> None:
        async with self.conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO consumed_offsets (consumer, topic, partition, next_offset)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (consumer, topic, partition)"
                " DO UPDATE SET next_offset = EXCLUDED.next_offset",
                [(self.name, tp.topic, tp.partition, o) for tp, o in offsets.items()],
            )

    async def _publish(self, p: Projection) -> None:
        assert self.redis is not None
        async with self.redis.pipeline(transaction=True) as pipe:
            latest: dict[str, dict[str, Any]] = {}
            for c in p.changes:
                message = change_message("change", c.device_id, c.version, c.twin, c.event)
                pipe.publish(self.redis_prefix + home_channel(c.home_id), message)
                latest[c.device_id] = c.twin
            for device_id, twin in latest.items():
                pipe.set(self.redis_prefix + twin_key(device_id), _json.encode(twin))
            await pipe.execute()


class _GenerationChanged(Exception):
    """A swap replaced the live schema since this projector loaded its positions."""


def _command_row(command: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(_json.encode(command[c]).decode() if c in ("params", "history") else command[c]
                 for c in COMMAND_COLUMNS)  # fmt: skip


def _columns(columns: Iterable[str]) -> sql.Composed:
    return sql.SQL(", ").join(map(sql.Identifier, columns))
