"""Rebuild and verify: replay the journal from its first offset into a fresh schema (replay.py) while the
live projector and the query API keep serving.

The replay reads the journal, the rollups topic and the home journal (automation runs and notification
outcomes; those of home-journal records the topic no longer holds are carried over from the live views:
home_carry.py).

``rebuild``: replay into ``<live>_rebuild_<time>`` (migrated by Alembic), check it (row count and content
checksum per table against what the replay wrote: checksums.py), then swap it in (swap.py). Under the
swap lock the new schema catches up exactly to the live projector's offsets, takes the next generation
number and is renamed in; nothing lost, nothing twice. Still under the lock, the Redis twin cache is
refreshed for the twins whose view the rebuild changed (cache_refresh.py).

``rebuild(archive=<table>)`` (``hearth rebuild --from-archive``; a local table or an ``s3a://`` one):
the replay reads the journal's archive first (a snapshot of its committed files, ``archive_source``), then
the journal's tail beyond it from Kafka, into the same fresh schema; checks and swap as above. The views
equal a rebuild from the journal (``tests/integration/test_rebuild_from_archive.py``).

A record the replay cannot project (undecodable, or a fact ``hearth_shared.domain.storable`` says cannot be
stored) is skipped and counted (``RebuildResult.skipped``): the live projector dead-lettered it already,
and the live views skipped it too, so the rebuilt views still equal them and the rebuild completes.

Both refuse (``RebuildFailed``) a history with a hole: once a retention window has passed the journal's
head, only ``--from-archive`` replays it whole (``archive_source.uncovered``).

``verify`` (``--from-archive`` too): replay into a scratch schema up to the live projector's offsets
(exactly, under the lock), take a snapshot of the live views at that moment and release the lock, compare
every table row by row (table_diff.py), and drop the scratch schema.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from hearth_read_models.projection.journal_source import Offsets
from hearth_read_models.projection.view_meta import read_generation, read_offsets
from hearth_read_models.rebuild.archive_order import ArchiveOutOfOrder
from hearth_read_models.rebuild.archive_source import ArchiveSnapshot, snapshot_archive
from hearth_read_models.rebuild.cache_refresh import refresh_cache
from hearth_read_models.rebuild.checksums import TableCheck
from hearth_read_models.rebuild.replay import REPLAY_PROCESSES, ProgressCallback, Replay, ReplayProgress
from hearth_read_models.rebuild.replay_shares import RebuildFailed
from hearth_read_models.rebuild.swap import stamp, swap_in, swap_locked
from hearth_read_models.rebuild.table_diff import Difference, compare_table
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.store import tables as t
from hearth_read_models.store.db import check_schema, connect, migrate, swap_lock
from hearth_shared.adapters.archive_log import ArchiveUnreadable, Table
from hearth_shared.adapters.archive_store import as_store

__all__ = [
    "REPLAY_PROCESSES",
    "RebuildFailed",
    "RebuildResult",
    "ReplayProgress",
    "VerifyResult",
    "rebuild",
    "verify",
]

COMPARED = (
    t.twins,
    t.device_events,
    t.commands,
    t.alerts,
    t.rollups,
    t.automation_runs,
    t.notification_outcomes,
)


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
    from_archive: int = 0  # of ``events``: records read from the archive (the rest from Kafka)

    @property
    def events_per_s(self) -> float:
        return self.events / self.replay_s if self.replay_s else 0.0


@dataclass
class VerifyResult:
    events: int
    differences: list[Difference]
    counts: dict[str, int]  # differences per table (all of them; ``differences`` lists the first ones)


async def rebuild(
    settings: ReadModelSettings,
    *,
    swap: bool = True,
    batch_size: int = 50_000,
    on_progress: ProgressCallback | None = None,
    processes: int = REPLAY_PROCESSES,
    archive: Table | None = None,
) -> RebuildResult:
    """Replay the journal (``archive``: that archive table, then the journal's tail) into a fresh schema,
    check it, and (with ``swap``) swap it in."""
    stack, live = settings.stack, check_schema(settings.schema_name)
    snapshot = await _open(archive)
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
        await _replay_history(r, snapshot, await r.end_offsets())
        async with await connect(stack.postgres_dsn, live) as conn:
            await r.follow(conn, live)
        indexing = time.perf_counter()
        await r.index()
        done = time.perf_counter()
        result = RebuildResult(
            r.schema, r.events, done - r.started, await r.check(), index_s=done - indexing, skipped=r.skipped,
            from_archive=snapshot.rows if snapshot is not None else 0,
        )  # fmt: skip
        if not all(c.ok for c in result.checks):
            raise RebuildFailed(f"the rebuilt views do not match what was replayed: {result.checks}")
        if swap:
            began = time.perf_counter()
            async with swap_locked(settings) as conn:
                await r.run_to(await read_offsets(conn, settings.consumer_name, live), "swapping")
                changed = await swap_in(conn, live, r.schema)
                r.keep = True  # it is the live schema now
                result.twins_refreshed = await refresh_cache(stack.redis_url, changed)
                result.generation = await read_generation(conn, live)
            result.swapped, result.swap_s = True, time.perf_counter() - began
    return result


async def verify(
    settings: ReadModelSettings,
    *,
    batch_size: int = 50_000,
    on_progress: ProgressCallback | None = None,
    processes: int = REPLAY_PROCESSES,
    archive: Table | None = None,
) -> VerifyResult:
    """Replay (``archive``: that archive table, then the journal's tail) into a scratch schema up to the
    live offsets and compare every table with the live one."""
    stack, live = settings.stack, check_schema(settings.schema_name)
    snapshot = await _open(archive)
    async with Replay(
        settings,
        f"{live}_verify_{stamp()}",
        batch_size=batch_size,
        on_progress=on_progress,
        processes=processes,
    ) as r:
        async with await connect(stack.postgres_dsn, live) as conn:
            await _replay_history(r, snapshot, await read_offsets(conn, settings.consumer_name, live))
            await r.follow(conn, live)
        await r.index()
        async with swap_locked(settings) as conn:
            await r.run_to(await read_offsets(conn, settings.consumer_name, live), "replay")
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                await conn.execute("SELECT 1 FROM meta")  # the snapshot of the live views, taken here
                await conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (swap_lock(live),))
                differences: list[Difference] = []
                counts: dict[str, int] = {}
                for table in COMPARED:
                    found, total = await compare_table(conn, table, live, r.schema)
                    differences += found
                    counts[table.name] = total
        return VerifyResult(r.events, differences, counts)


async def _open(archive: Table | None) -> ArchiveSnapshot | None:
    if archive is None:
        return None
    store = as_store(archive)
    try:
        return await asyncio.to_thread(snapshot_archive, store)
    except (ArchiveOutOfOrder, ArchiveUnreadable, OSError) as exc:  # pyarrow's I/O errors are OSErrors
        raise RebuildFailed(f"the archive {store.url} cannot be replayed: {exc}") from exc


async def _replay_history(r: Replay, archive: ArchiveSnapshot | None, stop_at: Offsets) -> None:
    """The archive (if any) then the journal up to ``stop_at``; refused unless together they hold the
    journal's whole history (``Replay.check_whole``)."""
    if archive is not None:
        await r.replay_archive(archive)
    else:
        await r.check_whole(None)
    await r.replay(stop_at)
