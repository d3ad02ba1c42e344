"""Compaction of the archive's small files (``archive_compact``) on a table laid out as the file sink
leaves it: a closed day's files in the newest ``.compact`` log become one sorted file, the log is
rewritten with the same rows once each, later batches and open days stay as they are, replaced files
go only after the grace period, and a compaction the job undid deletes its own files, never a named one."""

from __future__ import annotations

from collections import Counter
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hearth.groups.archive_cli import inspect_archive
from hearth_analytics.archive_files.archive_check import OffsetRange
from hearth_analytics.archive_files.archive_compact import compact_archive
from hearth_analytics.archive_files.archive_table import committed_files, read_columns
from hearth_shared.adapters.archive_log import METADATA_DIR
from tests.support.archive import write_table_by_hand

pytestmark = pytest.mark.unit

D1, D2, TODAY = "2026-11-20", "2026-11-21", date(2026, 11, 22)
BATCHES = [
    {D1: [(0, 0), (1, 0), (0, 1)], D2: [(0, 2)]},
    {D1: [(1, 1), (0, 3)]},
    {D1: [(1, 2)], D2: [(0, 4), (1, 3)]},
    {D2: [(0, 5)]},  # after the .compact log file: the job's recent work, left alone
]


def rows(table: Path) -> Counter[tuple[int, int, bytes]]:
    t = read_columns(table, ["kafka_partition", "kafka_offset", "value"])
    return Counter(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))


@pytest.fixture
def table(tmp_path: Path) -> Path:
    write_table_by_hand(tmp_path / "archive", BATCHES, compact_at=2)
    return tmp_path / "archive"


def test_closed_days_in_the_compact_log_become_one_sorted_file_each(table: Path) -> None:
    before, files_before = rows(table), committed_files(table)
    result = compact_archive(table, before=TODAY, grace_s=3600)
    assert [(d.day, d.files, d.rows) for d in result.days] == [(D1, 3, 6), (D2, 2, 3)]
    files = committed_files(table)
    assert rows(table) == before  # the same rows, each once
    by_day = Counter(Path(f.path).parent.name for f in files)
    assert by_day == {f"day={D1}": 1, f"day={D2}": 2}  # D2: its compacted file and batch 3's
    compacted = pq.read_table(result.days[0].path).to_pylist()
    keys = [(r["kafka_partition"], r["kafka_offset"]) for r in compacted]
    assert keys == sorted(keys) and len(keys) == 6
    assert all(Path(f.path).exists() for f in files_before)  # replaced, but kept for the grace period
    report = inspect_archive(table, {0: OffsetRange(0, 6), 1: OffsetRange(0, 4)}, complete=True)
    assert report.check.ok and report.uncommitted_files == 0  # awaiting their purge, not "uncommitted"
    assert compact_archive(table, before=TODAY, grace_s=3600).days == []  # nothing left to compact
    assert compact_archive(table, before=TODAY, grace_s=0).purged == 5
    assert {f.path for f in committed_files(table)} == {str(p) for p in table.rglob("*.parquet")}
    assert rows(table) == before


def test_a_day_not_closed_yet_is_left_alone(table: Path) -> None:
    result = compact_archive(table, before=date.fromisoformat(D2), grace_s=0)
    assert [d.day for d in result.days] == [D1]


def test_a_compaction_the_job_undid_deletes_only_its_own_files(table: Path) -> None:
    meta = table / METADATA_DIR
    old_log = (meta / "2.compact").read_text()
    before = rows(table)
    result = compact_archive(table, before=TODAY, grace_s=3600)
    # the job had read 2.compact before the rename, and writes 5.compact from it (and batches 3, 4, 5)
    (meta / "4").write_text("v1\n")
    (meta / "5.compact").write_text(old_log + (meta / "3").read_text().removeprefix("v1\n"))
    assert rows(table) == before  # the old files again, each row once
    compact_archive(table, before=date.fromisoformat(D1), grace_s=0)  # compacts nothing, purges
    assert not any(Path(d.path).exists() for d in result.days)  # the compacted files: in no log, deleted
    assert all(Path(f.path).exists() for f in committed_files(table))  # the named ones kept
    assert rows(table) == before


def test_without_a_compact_log_nothing_is_compacted(tmp_path: Path) -> None:
    write_table_by_hand(tmp_path / "t", BATCHES[:2], compact_at=-1)
    assert compact_archive(tmp_path / "t", before=TODAY).compact_log is None
