"""The archive as a projector's source (``archive_source``), on a table laid out as the file sink leaves
it: each share gets its partitions' records in offset order (across days and files, compacted or not),
the positions are the next offsets, a snapshot refuses a gap or a duplicate before anything is read,
and ``uncovered`` names the offsets neither the archive nor the journal holds."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from aiokafka import TopicPartition

from hearth_analytics.archive_files.archive_compact import compact_archive
from hearth_read_models.projection.journal_source import Batching
from hearth_read_models.rebuild.archive_order import ArchiveOutOfOrder
from hearth_read_models.rebuild.archive_source import (
    ArchiveSnapshot,
    ArchiveSource,
    snapshot_archive,
    uncovered,
)
from hearth_shared.adapters.archive_store import open_store
from tests.support.archive import write_table_by_hand

pytestmark = pytest.mark.unit

JOURNAL = "t.journal"
D1, D2 = "2026-11-20", "2026-11-21"
BATCHES = [  # partition 0's offsets 0..5 and partition 1's 0..3, interleaved over days and files
    {D1: [(0, 0), (1, 0), (0, 2)], D2: [(0, 1)]},
    {D1: [(1, 1), (0, 3)], D2: [(1, 2)]},
    {D2: [(0, 4), (1, 3), (0, 5)]},
]


async def read_all(source: ArchiveSource, stop_at: dict[TopicPartition, int]) -> list[tuple[int, int, bytes]]:
    await source.assign()
    source.seek({})
    got = []
    while not await source.reached(stop_at):
        for tp, records in (await source.fetch(stop_at)).items():
            assert all(r.topic == JOURNAL and r.partition == tp.partition for r in records)
            got += [(r.partition, r.offset, r.value or b"") for r in records]
    return got


def expected(partition: int, offsets: range) -> list[tuple[int, int, bytes]]:
    return [(partition, o, f"p{partition}o{o}".encode()) for o in offsets]


@pytest.mark.parametrize("compacted", [False, True])
async def test_each_share_reads_its_partitions_in_offset_order(tmp_path: Path, compacted: bool) -> None:
    table = tmp_path / "archive"
    write_table_by_hand(table, BATCHES, compact_at=2)
    if compacted:
        assert compact_archive(table, before=date(2026, 12, 1)).days
    snapshot = snapshot_archive(table)
    assert (snapshot.firsts, snapshot.ends, snapshot.rows) == ({0: 0, 1: 0}, {0: 6, 1: 4}, 10)
    stop_at = snapshot.stop_at(JOURNAL)
    for k, partition, offsets in ((0, 0, range(6)), (1, 1, range(4))):
        source = ArchiveSource(snapshot, JOURNAL, batching=Batching(size=3), share=(k, 2))
        got = await read_all(source, stop_at)
        assert got == expected(partition, offsets)
        assert await source.position(TopicPartition(JOURNAL, partition)) == offsets.stop
    whole = ArchiveSource(snapshot, JOURNAL, batching=Batching(size=4))
    got = await read_all(whole, {TopicPartition(JOURNAL, 0): 4, TopicPartition(JOURNAL, 1): 4})
    assert sorted(got) == sorted(expected(0, range(4)) + expected(1, range(4)))  # stops at stop_at


def test_a_gap_or_a_duplicate_stops_the_snapshot(tmp_path: Path) -> None:
    write_table_by_hand(tmp_path / "gap", [{D1: [(0, 0), (0, 2)]}], compact_at=0)
    with pytest.raises(ArchiveOutOfOrder, match=r"partition 0: 2 rows for offsets 0\.\.2"):
        snapshot_archive(tmp_path / "gap")
    write_table_by_hand(tmp_path / "twice", [{D1: [(3, 0), (3, 1)]}, {D2: [(3, 1)]}], compact_at=1)
    with pytest.raises(ArchiveOutOfOrder, match=r"partition 3: 3 rows for offsets 0\.\.1"):
        snapshot_archive(tmp_path / "twice")


def test_uncovered_names_what_neither_the_archive_nor_the_journal_holds(tmp_path: Path) -> None:
    snapshot = ArchiveSnapshot(
        open_store(tmp_path), [], firsts={0: 0, 1: 0, 2: 5}, ends={0: 100, 1: 50, 2: 9}
    )
    journal = {0: (80, 120), 1: (60, 70), 2: (0, 9), 3: (10, 20)}
    assert uncovered(snapshot, journal) == [
        "partition 1: offsets 50..59 are in neither the archive (it ends there) nor the journal (it keeps "
        "them from 60)",
        "partition 2: the archive starts at offset 5, the journal keeps 0..4 before it: rebuild from the "
        "journal",
        "partition 3: offsets 0..9 are in neither the archive (nothing of it is archived) nor the journal "
        "(a retention window passed them)",
    ]
    assert uncovered(snapshot, {0: (0, 90), 1: (0, 50), 2: (5, 9)})[0].startswith(
        "partition 0: the archive reaches offset 99, beyond the journal's end 90"
    )


def test_without_an_archive_a_journal_whose_head_a_retention_window_passed_is_not_whole() -> None:
    assert uncovered(None, {0: (0, 10), 1: (0, 0)}) == []
    assert uncovered(None, {0: (0, 10), 1: (4, 9)}) == [
        "partition 1: offsets 0..3 are in neither the archive (nothing of it is archived) nor the journal "
        "(a retention window passed them)"
    ]
