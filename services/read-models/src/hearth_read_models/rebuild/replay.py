"""A replay: a fresh schema, migrated, and a projector with the ``ReplaySink`` filling it from the
journal's first offset while the live projector and the query API keep serving.

The bulk of the journal is shared out by partition over ``processes`` processes (this one and spawned
children, replay_shares.py); then this process's projector takes every partition again for the rest
(catching up with live, the swap). The history's primary key is left out during the bulk and built once
at the end (one sorted build is cheaper than an index kept up row by row; a fact twice would fail it).
The schema is dropped on exit unless ``keep`` was set (a swap took it).

From the journal's archive (``replay_archive``, before ``replay``): the archive snapshot's partitions are
shared out over the processes the same way, each reading Parquet (``archive_source``) up to the
archive's end per partition; the positions committed with the rows are those offsets, so ``replay`` then
reads from Kafka only the journal's tail beyond the archive (this process alone: the shares were used).
The journal must still hold every offset the archive lacks (``archive_source.uncovered``).

The home journal is replayed by this process (never a share), with the rollups topic; the runs and
outcomes of its records that the topic no longer holds are copied from the live schema first
(home_carry.py says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import psycopg
from aiokafka import TopicPartition

from hearth_read_models.projection.app import make_consumer
from hearth_read_models.projection.journal_source import Batching, JournalSource, Offsets
from hearth_read_models.projection.projector import Projector
from hearth_read_models.projection.view_meta import read_offsets
from hearth_read_models.rebuild.archive_order import ArchiveOutOfOrder
from hearth_read_models.rebuild.archive_source import ArchiveSnapshot, ArchiveSource, uncovered
from hearth_read_models.rebuild.checksums import TableCheck, Tally, check_tables
from hearth_read_models.rebuild.home_carry import carry_over
from hearth_read_models.rebuild.replay_shares import RebuildFailed, ReplayShare, replay_projector
from hearth_read_models.rebuild.swap import drop_schema
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.store.db import check_schema, connect, migrate

# Processes sharing the bulk of a replay by journal partition: the fold is pure Python (one core per
# process), and PostgreSQL and the broker take their share of the cores too.
REPLAY_PROCESSES = 2
FOLLOW_ROUNDS = 20  # catch-up rounds before the swap takes the lock for the rest
INDEX_BUILD_MEMORY = "1GB"  # the history's key is sorted in memory


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


class Replay:
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
        self.collecting = gc.isenabled()
        self.consumer = make_consumer(settings.stack)
        self._projector: Projector | None = None
        self._journal: JournalSource | None = None
        self.tps: list[TopicPartition] = []  # every partition of the journal and the rollups
        self.shares: list[ReplayShare] = []  # children started and not finished
        self.shared_events = 0  # records the finished children projected
        self.shared_skipped = 0  # records the finished children could not project

    @property
    def projector(self) -> Projector:
        if self._projector is None:
            raise RuntimeError("the replay has not been entered")
        return self._projector

    async def __aenter__(self) -> Replay:
        # the children first: they take seconds to start (a fresh interpreter importing the projector)
        self.shares = [
            ReplayShare(self.settings, self.schema, self.batch_size, (k, self.processes))
            for k in range(1, self.processes)
        ]
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
        gc.disable()
        await asyncio.to_thread(migrate, stack.postgres_dsn, self.schema)
        async with await connect(stack.postgres_dsn, self.schema) as conn:  # built once, at the end
            await conn.execute("ALTER TABLE device_events DROP CONSTRAINT device_events_pkey")
        await self.consumer.start()
        self._projector = replay_projector(
            self.settings, self.schema, self.consumer, self.batch_size, side_topics=True
        )
        self._projector.on_commit = self.tally.add
        assert isinstance(self._projector.source, JournalSource)
        self._journal = self._projector.source
        await self._projector.start()
        self.tps = list(self._projector.tps)
        await self._carry_home_history()
        self.started = time.perf_counter()
        return self

    async def _carry_home_history(self) -> None:
        """The runs and outcomes whose home-journal records are gone, from the live schema (home_carry)."""
        home = [tp for tp in self.tps if tp.topic == self.settings.stack.topics.home_journal]
        lows = await self.consumer.beginning_offsets(home)
        async with await connect(self.settings.stack.postgres_dsn, self.schema) as conn:
            carried = await carry_over(
                conn, self.settings.schema_name, self.schema, {tp.partition: o for tp, o in lows.items()}
            )
        self.tally.carried(*carried)

    async def __aexit__(self, *exc: object) -> None:
        for share in self.shares:
            share.stop()
        if self._projector is not None:
            await self._projector.stop()
        await self.consumer.stop()
        if not self.keep:
            with contextlib.suppress(psycopg.Error):
                await drop_schema(self.settings.stack.postgres_dsn, self.schema)
        if self.collecting:
            gc.enable()
            gc.collect()

    async def index(self) -> None:
        """Build the history's primary key, left out while the bulk of the journal was replayed."""
        async with await connect(self.settings.stack.postgres_dsn, self.schema) as conn:
            await conn.execute(f"SET maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")  # a sort in memory
            await conn.execute(
                "ALTER TABLE device_events ADD CONSTRAINT device_events_pkey PRIMARY KEY (device_id, version)"
            )

    @property
    def events(self) -> int:
        stats = self.projector.stats
        shared = self.shared_events + sum(s.events for s in self.shares)
        return stats.events + stats.rollups + stats.home_facts + shared

    @property
    def skipped(self) -> int:
        return self.projector.stats.dead_letters + self.shared_skipped

    async def end_offsets(self) -> Offsets:
        ends: dict[TopicPartition, int] = await self.consumer.end_offsets(self.tps)
        return ends

    @property
    def journal(self) -> JournalSource:
        if self._journal is None:
            raise RuntimeError("the replay has not been entered")
        return self._journal

    async def replay(self, stop_at: Offsets) -> None:
        """The bulk: up to ``stop_at`` exactly, the journal's partitions shared over the processes."""
        if not self.shares:
            return await self.run_to(stop_at, "replay")
        self.journal.share = (0, self.processes)
        await self.projector.start()  # its share only
        async with self._reporting("replay"):
            for share in self.shares:
                share.go(stop_at)
            await self.projector.run(stop_at=stop_at)
            await self._collect_shares()
        self.journal.share = (0, 1)
        await self.projector.start()  # every partition, from the offsets the shares committed

    async def check_whole(self, archive: ArchiveSnapshot | None) -> None:
        """Raise ``RebuildFailed`` unless the archive (``None``: none) and then the journal hold every
        offset the journal ever had (``archive_source.uncovered``): a replay without the head a retention
        window passed would forget what the live views hold."""
        journal = self.settings.stack.topics.journal
        tps = [tp for tp in self.tps if tp.topic == journal]
        lows, highs = await self.consumer.beginning_offsets(tps), await self.consumer.end_offsets(tps)
        problems = uncovered(archive, {tp.partition: (lows[tp], highs[tp]) for tp in tps})
        if problems:
            raise RebuildFailed(
                ("the archive and the journal do not make a whole history: " if archive is not None else
                 "the journal no longer holds its whole history (replay it --from-archive): ")
                + "; ".join(problems)
            )  # fmt: skip

    async def replay_archive(self, archive: ArchiveSnapshot) -> None:
        """The archive up to its end per partition, shared over the processes; then every partition is
        read from Kafka from there (see the module)."""
        await self.check_whole(archive)
        journal = self.settings.stack.topics.journal
        stop_at = archive.stop_at(journal)
        batching = Batching(size=self.batch_size)
        self.projector.source = ArchiveSource(archive, journal, batching=batching, share=(0, self.processes))
        try:
            await self.projector.start()
            async with self._reporting("replay from the archive"):
                for share in self.shares:
                    share.go(stop_at, archive)
                await self.projector.run(stop_at=stop_at)
                await self._collect_shares()
        except ArchiveOutOfOrder as exc:
            raise RebuildFailed(str(exc)) from exc
        finally:
            self.projector.source = self.journal
        self.journal.share = (0, 1)
        await self.projector.start()  # every partition, from where the archive ends

    async def _collect_shares(self) -> None:
        for share in list(self.shares):
            result = await share.result()
            self.tally.merge(result.tally)
            self.shared_events += result.events
            self.shared_skipped += result.skipped
            self.shares.remove(share)
            share.stop()  # it has ended: reaped

    async def run_to(self, stop_at: Offsets, phase: str) -> None:
        """Project up to ``stop_at`` exactly, reporting progress meanwhile."""
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
        if self.on_progress is None:
            return
        ends = await self.end_offsets()
        positions = [await self.projector.source.position(tp) for tp in self.projector.tps]
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
        for _ in range(FOLLOW_ROUNDS):
            target = await read_offsets(conn, self.settings.consumer_name, live)
            behind = sum(max(0, o - self.projector.positions.get(tp, 0)) for tp, o in target.items())
            if behind < self.batch_size:
                return
            await self.run_to(target, "catching up with live")

    async def check(self) -> list[TableCheck]:
        """Row count and checksum of every view table against what the replay wrote."""
        async with await connect(self.settings.stack.postgres_dsn, self.schema) as conn:
            return await check_tables(conn, self.tally)
