"""Records from the journal's archive (Parquet, ``hearth_analytics.jobs.archive``) for ``hearth rebuild
--from-archive``: the same batches a ``JournalSource`` gives the projector, read with pyarrow (this
service never carries Spark).

``snapshot_archive`` fixes what a rebuild reads: the committed files of that moment (the commit log,
``hearth_shared.adapters.archive_log``; the archive job may go on writing), on a local table or on S3
(``hearth_shared.adapters.archive_store``: pyarrow reads both; the store goes with the snapshot), and,
from their ``kafka_partition`` and ``kafka_offset`` columns alone, each partition's first offset and end
(one past the last). A partition whose row count differs from its offset span has a gap or a duplicate:
the rebuild stops there, before replaying anything. Every process of a replay reads the same snapshot
(it is sent to the children).

``ArchiveSource`` then reads the files in log order, one row group at a time (in a thread: the sink's
write of the previous batch goes on meanwhile), keeps the rows of its share of the partitions (row groups
whose partition statistics exclude the share are skipped unread: a compacted file is sorted by partition
and offset, and the archive job writes one file per journal partition), and hands them out in offset
order per partition (``archive_order.OffsetOrder``). Its positions are the next offsets, as a consumer's
are, so the projector commits the same offsets with its rows as a replay from Kafka would; the journal's
tail is then read from Kafka from those positions.

A record's value is the exact bytes the journal holds (the archive's ``value`` column, the same in both
of the archive's layouts, ``hearth_analytics.sources.archive_layout``: archives written before its typed
columns replay unchanged); its Kafka key and timestamp are not archived and not used by the projection (a
record from here has none).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from hearth_read_models.projection.journal_source import Batching, Offsets, Record, Records
from hearth_read_models.rebuild.archive_order import ArchiveOutOfOrder, OffsetOrder, Run
from hearth_shared.adapters.archive_log import Table, committed_files
from hearth_shared.adapters.archive_store import ArchiveStore, as_store

PARTITION, OFFSET, VALUE = "kafka_partition", "kafka_offset", "value"


@dataclass(frozen=True)
class ArchiveSnapshot:
    """The archive a rebuild reads: its committed files (log order) and each partition's offsets."""

    table: ArchiveStore
    files: list[str]  # paths on the table's filesystem
    firsts: dict[int, int]  # partition -> first archived offset
    ends: dict[int, int]  # partition -> one past the last archived offset

    @property
    def rows(self) -> int:
        return sum(self.ends[p] - self.firsts[p] for p in self.ends)

    def stop_at(self, journal: str) -> Offsets:
        return {TopicPartition(journal, p): end for p, end in self.ends.items()}


def snapshot_archive(table: Table) -> ArchiveSnapshot:
    """The table's committed files and offset ranges now; a gap or a duplicate is ``ArchiveOutOfOrder``."""
    store = as_store(table)
    files = [f.path for f in committed_files(store)]
    firsts: dict[int, int] = {}
    ends: dict[int, int] = {}
    counts: dict[int, int] = {}
    for path in files:
        offsets = pq.ParquetFile(path, filesystem=store.fs).read(columns=[PARTITION, OFFSET])
        grouped = offsets.group_by(PARTITION).aggregate([(OFFSET, "min"), (OFFSET, "max"), (OFFSET, "count")])
        for row in grouped.to_pylist():
            p = int(row[PARTITION])
            firsts[p] = min(firsts.get(p, row[f"{OFFSET}_min"]), row[f"{OFFSET}_min"])
            ends[p] = max(ends.get(p, 0), row[f"{OFFSET}_max"] + 1)
            counts[p] = counts.get(p, 0) + row[f"{OFFSET}_count"]
    unfit = [
        f"partition {p}: {counts[p]:,} rows for offsets {firsts[p]:,}..{ends[p] - 1:,}"
        for p in sorted(ends)
        if counts[p] != ends[p] - firsts[p]
    ]
    if unfit:
        raise ArchiveOutOfOrder(
            "the archive has gaps or duplicates (run `hearth archive verify`): " + "; ".join(unfit)
        )
    return ArchiveSnapshot(store, files, firsts, ends)


def uncovered(archive: ArchiveSnapshot | None, journal: dict[int, tuple[int, int]]) -> list[str]:
    """Why the archive (``None``: no archive) then the journal's tail (``journal``: partition -> (first
    kept, end) offsets now) would not replay the whole history the journal ever held; empty if they do.

    A replay that lacks a partition's first offsets would build views without them and, swapped in,
    forget what the live views still hold: once a retention window has passed the journal's head, only
    the archive has it (issue 20: a retention window that forgets nothing)."""
    problems = []
    for p, (low, high) in sorted(journal.items()):
        archived = archive is not None and p in archive.ends
        first, end = (archive.firsts[p], archive.ends[p]) if archive is not None and archived else (low, low)
        if end > high:
            problems.append(f"partition {p}: the archive reaches offset {end - 1:,}, beyond the journal's "
                            f"end {high:,} (the archive of another journal?)")  # fmt: skip
        elif low > end:
            problems.append(f"partition {p}: offsets {end:,}..{low - 1:,} are in neither the archive (it "
                            f"ends there) nor the journal (it keeps them from {low:,})")  # fmt: skip
        if first > low:
            problems.append(f"partition {p}: the archive starts at offset {first:,}, the journal keeps "
                            f"{low:,}..{first - 1:,} before it: rebuild from the journal")  # fmt: skip
        elif first > 0:
            where = "the archive starts there" if archived else "nothing of it is archived"
            problems.append(f"partition {p}: offsets 0..{first - 1:,} are in neither the archive ({where}) "
                            f"nor the journal (a retention window passed them)")  # fmt: skip
    if archive is not None:
        problems += [f"partition {p}: archived, but the journal has no such partition"
                     for p in sorted(set(archive.ends) - set(journal))]  # fmt: skip
    return problems


def _records(journal: str, run: Run, take: int) -> list[Record]:
    """The first ``take`` rows of ``run`` as consumer records (no key, no timestamp: not archived)."""
    p = run.partition
    return [
        ConsumerRecord(journal, p, offset, -1, 0, None, value, None, -1, len(value), ())
        for offset, value in zip(range(run.first, run.first + take), run.values, strict=False)
    ]


class ArchiveSource:
    """A projector's source over an archive snapshot (the journal's partitions only, no rollups nor home
    journal)."""

    home_journal: str | None = None

    def __init__(
        self,
        snapshot: ArchiveSnapshot,
        journal: str,
        *,
        batching: Batching = Batching(),
        share: tuple[int, int] = (0, 1),
    ) -> None:
        self.snapshot = snapshot
        self.journal = journal
        self.batching = batching
        self.share = share
        self.tps: list[TopicPartition] = []
        self.positions: Offsets = {}
        self._order = OffsetOrder({}, {})
        self._ready: deque[Run] = deque()
        self._ready_rows = 0  # rows in ``_ready``
        self._pending: list[tuple[str, int]] = []  # (file, row group) still to read

    def _partitions(self) -> list[int]:
        k, n = self.share
        return [p for p in sorted(self.snapshot.ends) if p % n == k]

    async def assign(self) -> list[TopicPartition]:
        self.tps = [TopicPartition(self.journal, p) for p in self._partitions()]
        return self.tps

    def seek(self, positions: Offsets) -> None:
        """Start (again) from ``positions``, or each partition's first archived offset."""
        self.positions = {
            tp: max(positions.get(tp, 0), self.snapshot.firsts[tp.partition]) for tp in self.tps
        }
        self._order = OffsetOrder(
            {tp.partition: o for tp, o in self.positions.items()},
            {tp.partition: self.snapshot.ends[tp.partition] for tp in self.tps},
        )
        self._ready.clear()
        self._ready_rows = 0
        self._pending = [] if self._order.done() else [(path, -1) for path in self.snapshot.files]

    async def position(self, tp: TopicPartition) -> int:
        return self.positions.get(tp, 0)

    async def reached(self, stop_at: Offsets) -> bool:
        return all(self.positions.get(tp, 0) >= stop_at.get(tp, 0) for tp in self.tps)

    async def fetch(self, stop_at: Offsets | None) -> Records:
        """The next batch of up to ``batching.size`` records, in offset order per partition."""
        size = self.batching.size
        while self._ready_rows < size and self._pending:
            runs = await asyncio.to_thread(self._read_next)
            self._ready.extend(runs)
            self._ready_rows += sum(len(r.values) for r in runs)
        records: Records = {}
        count = 0
        while self._ready and count < size:
            run = self._ready.popleft()
            self._ready_rows -= len(run.values)
            tp = TopicPartition(self.journal, run.partition)
            limit = len(run.values) if stop_at is None else stop_at.get(tp, 0) - run.first
            if limit <= 0:
                continue  # at or past stop_at: not handed out
            take = min(len(run.values), limit, size - count)
            records.setdefault(tp, []).extend(_records(self.journal, run, take))
            count += take
            self.positions[tp] = run.first + take
            if take < min(len(run.values), limit):  # the batch is full: the rest of the run next time
                rest = Run(run.partition, run.first + take, run.values[take:])
                self._ready.appendleft(rest)
                self._ready_rows += len(rest.values)
        if not count and not self._pending and not self._ready:
            self._order.check_complete()  # every file read: a partition short of its end has a gap
        return records

    def _read_next(self) -> list[Run]:
        """Read the next row group (opening its file's row group list first): the runs now ready."""
        path, group = self._pending.pop(0)
        parquet = pq.ParquetFile(path, filesystem=self.snapshot.table.fs)
        if group < 0:  # the file's row groups that may hold the share's partitions
            wanted = set(self._partitions())
            self._pending[:0] = [(path, g) for g in _groups_with(parquet, wanted)]
            return []
        rows = parquet.read_row_group(group, columns=[PARTITION, OFFSET, VALUE])
        rows = rows.filter(
            pc.is_in(rows[PARTITION], value_set=pa.array(self._partitions(), rows[PARTITION].type))
        )
        rows = rows.sort_by([(PARTITION, "ascending"), (OFFSET, "ascending")])
        partitions = rows[PARTITION].to_pylist()
        offsets = rows[OFFSET].to_pylist()
        values = rows[VALUE].to_pylist()
        ready: list[Run] = []
        start = 0
        for i in range(1, len(partitions) + 1):
            if i == len(partitions) or partitions[i] != partitions[start]:
                ready += self._order.add(partitions[start], offsets[start:i], values[start:i])
                start = i
        return ready


def _groups_with(parquet: pq.ParquetFile, partitions: set[int]) -> list[int]:
    """The row groups whose ``kafka_partition`` statistics do not exclude every one of ``partitions``."""
    meta = parquet.metadata
    column = parquet.schema_arrow.get_field_index(PARTITION)
    groups = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max or any(stats.min <= p <= stats.max for p in partitions):
            groups.append(g)
    return groups
