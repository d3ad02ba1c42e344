"""The projection core: reads the journal (and the rollups topic and the home journal) in batches, decodes
and folds each batch into in-memory caches of twins and commands, and has a ``Sink`` commit it; the live
projector and a rebuild's replay are this one class with a different sink (live_sink.py,
rebuild/replay_sink.py).

Exactly once into PostgreSQL: a batch's rows and the consumed offsets are written in one transaction
(view_store.py), and a (re)start seeks to the offsets stored. The sink decides what surrounds that
transaction: the live one takes the swap lock, checks the generation and publishes to Redis; the replay
pipelines (folds the next batch while the last one is written) and writes its twins rarely.

Twins and commands come from the caches; only ones not seen yet are read, in the batch's transaction.
A sink that is the schema's sole writer (a replay) and finds it empty reads nothing back at all: its
caches hold everything it wrote. Twins changed in memory are written when ``Sink.twin_batch`` of them
are pending (1 for the live sink: every batch), and whatever is pending when a bounded run ends.

Home-journal records are projected one by one into run and outcome rows (``home_rules``), nothing
cached; a record that is not a home fact is a dead letter like a bad journal record.

Poison: a fact that decodes but cannot be stored (``hearth_shared.domain.storable``: a NUL in a name, an id
off the pattern, a >64-bit integer), or whose projection raises, goes to ``dead_letters`` with its reason
(a replay has none: it counts and skips it; the live projector sent the letter), and the batch goes on
without it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition

from hearth_read_models.projection.home_rules import HomeRows, home_row
from hearth_read_models.projection.journal_source import JournalSource, Offsets, Record, Records, RecordSource
from hearth_read_models.projection.rules import (
    Projection,
    RollupRow,
    TwinRow,
    command_ids,
    rollup_row,
    twin_row,
)
from hearth_read_models.projection.view_store import Batch, ViewStore
from hearth_shared.adapters.kafka import DeadLetters
from hearth_shared.domain import Twin
from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.events import TERMINAL_STATUSES, Event, MalformedRecord

log = logging.getLogger(__name__)

MAX_CACHED_TWINS = 200_000  # beyond this the cache is emptied (and refilled from the views as needed)
# Records decoded or folded between two turns of the event loop. A batch's write (the sink's COPY) runs
# on the same loop meanwhile and sends only when the loop turns: with 2,000 (about 20 ms of work) the
# PostgreSQL backend waited for data most of the time (measured: a rebuild process idle 45 %).
YIELD_EVERY = 250


@dataclass
class ProjectorStats:
    events: int = 0  # journal records read
    rollups: int = 0  # rollup records read
    home_facts: int = 0  # home-journal records read
    batches: int = 0
    skipped: int = 0
    dead_letters: int = 0
    reloads: int = 0  # batches dropped because a swap changed the generation


class Sink(Protocol):
    """How a projector's batches are committed (the live views, or a replay's private schema)."""

    publishes: bool  # the batches' changes are told to subscribers (the projection collects them)
    sole_writer: bool  # nothing else writes the schema meanwhile: an empty one needs no reads back
    twin_batch: int  # changed twins are written once this many are pending

    async def opened(self, projector: Projector) -> None:
        """The store was (re)connected: set its session up."""

    async def take(self, projector: Projector, records: Records) -> None:
        """Project and commit (or start committing) one fetched batch."""

    async def drain(self) -> None:
        """Wait for any batch still being written; its error is raised here."""

    async def abandon(self) -> None:
        """The run failed or was cancelled: a batch being written is rolled back."""


class Projector:
    def __init__(
        self,
        source: RecordSource,
        store: ViewStore,
        sink: Sink,
        *,
        dead_letters: DeadLetters | None = None,
        on_commit: Callable[[Batch], None] | None = None,
    ) -> None:
        self.source = source
        self.store = store
        self.sink = sink
        self.dead_letters = dead_letters
        self.on_commit = on_commit
        self.stats = ProjectorStats()
        self.positions: Offsets = {}  # next offset projected into PostgreSQL
        self.generation = -1
        self.twins: dict[str, Twin] = {}
        self.commands: dict[uuid.UUID, dict[str, Any]] = {}
        self.complete = False  # the caches hold every twin and command of the schema: nothing to read
        self.dirty: set[str] = set()  # twins changed in memory and not written yet

    @property
    def consumer(self) -> AIOKafkaConsumer:
        if not isinstance(self.source, JournalSource):
            raise TypeError(f"this projector reads {type(self.source).__name__}, not a Kafka consumer")
        return self.source.consumer

    @property
    def tps(self) -> list[TopicPartition]:
        return self.source.tps

    @property
    def name(self) -> str:
        return self.store.consumer

    async def start(self) -> None:
        """Take the source's partitions (again, after its share changed) and load the positions."""
        await self.source.assign()
        await self.load()
        log.info("projector %s starts at %s", self.name, self.describe())

    async def stop(self) -> None:
        await self.store.close()

    def describe(self) -> str:
        records = sum(self.positions.values())
        return f"generation {self.generation}, {records} records in, schema {self.store.schema}"

    async def load(self) -> None:
        """(Re)connect, read the generation and the positions, empty the caches, seek."""
        loaded = await self.store.open()
        await self.sink.opened(self)
        self.forget()
        self.generation = loaded.generation
        self.complete = loaded.empty and self.sink.sole_writer
        self.positions = {tp: loaded.offsets.get(tp, 0) for tp in self.tps}
        self.source.seek(self.positions)

    async def run(self, *, stop_at: Offsets | None = None) -> None:
        """Project forever, or exactly up to ``stop_at`` (records from there on stay unread)."""
        try:
            while stop_at is None or not await self.source.reached(stop_at):
                records = await self.source.fetch(stop_at)
                if records:
                    await self.sink.take(self, records)
            await self.sink.drain()
            if self.dirty:  # the last twins: the schema is whole again
                await self.commit(Batch(self.projection(), {}, {}, self.dirty_rows()))
        finally:
            await self.sink.abandon()
            if stop_at is not None and self.store.connected:
                self.source.seek(self.positions)  # records fetched past stop_at are read again next run

    def projection(self) -> Projection:
        return Projection(self.twins, self.commands, collect_changes=self.sink.publishes)

    async def commit(self, batch: Batch) -> None:
        """Write ``batch`` in a transaction of its own."""
        try:
            async with self.store.conn.transaction():
                await self.store.write(batch)
        except BaseException:
            self.forget()
            raise
        self.committed(batch)

    def forget(self) -> None:
        """Empty the caches: they may be ahead of what was committed."""
        self.twins.clear()
        self.commands.clear()
        self.dirty.clear()
        self.complete = False

    def committed(self, batch: Batch) -> None:
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
            self.forget()

    async def prepare(self, records: Records) -> Batch:
        """Decode the batch and fold it into the caches (yielding now and then to a write in flight)."""
        events: list[tuple[Record, Event]] = []
        rollups: dict[str, RollupRow | None] = {}
        home = HomeRows()
        offsets = {tp: rs[-1].offset + 1 for tp, rs in records.items()}
        journal = self.source.journal
        for tp, rs in records.items():
            await asyncio.sleep(0)  # a write in flight goes on
            if tp.topic != journal:
                await self._side_records(tp.topic, rs, rollups, home)
                continue
            self.stats.events += len(rs)
            append = events.append  # (locals: this loop and the next run once per record)
            for start in range(0, len(rs), YIELD_EVERY):
                await asyncio.sleep(0)  # a write in flight goes on
                for r in rs[start : start + YIELD_EVERY]:
                    try:
                        append((r, decode_fact(r.value)))  # decoded, and storable in the views
                    except MalformedRecord as error:
                        await self.dead_letter(r, error)
        if not self.complete:
            await self._load_missing([e for _, e in events])
        projection = self.projection()
        apply = projection.apply
        for start in range(0, len(events), YIELD_EVERY):
            await asyncio.sleep(0)  # a write in flight goes on
            for r, event in events[start : start + YIELD_EVERY]:
                try:
                    apply(event, r.value)
                except MalformedRecord as error:
                    await self.dead_letter(r, error)
                except Exception as error:  # a fact the projection cannot fold changes nothing (see apply)
                    log.exception("could not project %s[%d]@%d", r.topic, r.partition, r.offset)
                    await self.dead_letter(r, MalformedRecord("projection_failed", repr(error)))
        projection.settle()
        self.dirty |= projection.changed_twins
        twins = self.dirty_rows() if len(self.dirty) >= self.sink.twin_batch else []
        return Batch(projection, rollups, offsets, twins, home)

    def dirty_rows(self) -> list[TwinRow]:
        rows = [twin_row(self.twins[d]) for d in self.dirty]
        self.dirty.clear()
        return rows

    async def _rollup(self, r: Record, rollups: dict[str, RollupRow | None]) -> None:
        """A rollup record into ``rollups`` (by key; None: a tombstone deletes the row)."""
        try:
            if r.value is None:
                rollups[(r.key or b"").decode(errors="replace")] = None
            else:
                row = rollup_row(r.key, r.value)
                rollups[row.key] = row
        except MalformedRecord as error:
            await self.dead_letter(r, error)

    async def _side_records(
        self, topic: str, rs: list[Record], rollups: dict[str, RollupRow | None], home: HomeRows
    ) -> None:
        """Records of the home journal into ``home`` (most home facts project nothing), or of the rollups
        topic into ``rollups``."""
        if topic == self.source.home_journal:
            self.stats.home_facts += len(rs)
            for r in rs:
                try:
                    home.add(home_row(r.value, r.partition, r.offset))
                except MalformedRecord as error:
                    await self.dead_letter(r, error)
            return
        self.stats.rollups += len(rs)
        for r in rs:
            await self._rollup(r, rollups)

    async def dead_letter(self, r: Record, error: MalformedRecord) -> None:
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
            return  # the sole writer of a schema it found empty: all there is was written from these caches
        await self.sink.drain()  # a batch in flight, on the same connection
        devices = list({e.device_id for e in events} - self.twins.keys())
        if devices:
            self.twins.update(await self.store.twins(devices))
        commands = list(command_ids(events) - self.commands.keys())
        if commands:
            self.commands.update(await self.store.commands(commands))
