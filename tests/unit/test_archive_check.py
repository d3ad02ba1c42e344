"""The archive-against-journal comparison (pure): gaps, duplicates, lag, history the journal dropped,
offsets beyond the journal, and the committed-file list read from a file-sink log."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hearth_analytics.archive_files.archive_check import OffsetRange, check_archive
from hearth_analytics.archive_files.archive_table import committed_files, newest_batch

pytestmark = pytest.mark.unit


def rows(spec: dict[int, list[int]]) -> tuple[np.ndarray, np.ndarray]:
    partitions = [p for p, offsets in spec.items() for _ in offsets]
    offsets = [o for offs in spec.values() for o in offs]
    return np.array(partitions, dtype=np.int64), np.array(offsets, dtype=np.int64)


def test_complete_archive_verifies() -> None:
    check = check_archive(
        *rows({0: list(range(10)), 1: list(range(5))}), {0: OffsetRange(0, 10), 1: OffsetRange(0, 5)}
    )
    assert check.ok and check.lag == 0 and check.problems() == []


def test_gap_and_duplicate_are_named() -> None:
    offsets = [0, 1, 2, 4, 5, 5, 6, 9, 10, 11]  # 3 and 7..8 missing, 5 twice
    check = check_archive(*rows({0: offsets}), {0: OffsetRange(0, 12)})
    p = check.partitions[0]
    assert (p.missing, p.gaps, p.duplicates, p.duplicate_examples) == (3, [(3, 4), (7, 9)], 1, [5])
    assert not check.ok
    assert check.problems() == [
        "partition 0: 1 offsets archived more than once, e.g. 5",
        "partition 0: 3 offsets missing: 3, 7..8",
    ]


def test_lag_is_not_a_gap_unless_complete_is_required() -> None:
    spec, journal = rows({0: [0, 1, 2]}), {0: OffsetRange(0, 8), 1: OffsetRange(0, 2)}
    check = check_archive(*spec, journal)
    assert check.ok and check.lag == 5 + 2
    strict = check_archive(*spec, journal, complete=True)
    assert not strict.ok and strict.problems() == [
        "7 journal facts not archived yet (complete archive required)"
    ]


def test_history_below_the_journals_retention_is_kept_not_compared() -> None:
    check = check_archive(*rows({0: [3, 4, 5, 6, 7]}), {0: OffsetRange(6, 9)})
    p = check.partitions[0]
    assert check.ok and p.before_journal == 3 and p.lag == 1 and p.missing == 0
    # The archive starting above the journal's low mark is a gap (the facts in between are lost).
    late = check_archive(*rows({0: [8]}), {0: OffsetRange(6, 9)})
    assert late.partitions[0].gaps == [(6, 8)] and not late.ok


def test_offsets_beyond_the_journal_or_unknown_partitions_fail() -> None:
    check = check_archive(*rows({0: [0, 1, 2], 3: [0]}), {0: OffsetRange(0, 2)})
    assert [p.partition for p in check.partitions if not p.ok] == [0, 3]
    assert check.partitions[0].ahead == 1


def test_empty_archive_lags_by_the_whole_journal() -> None:
    check = check_archive(*rows({}), {0: OffsetRange(0, 4), 1: OffsetRange(2, 2)})
    assert check.ok and check.lag == 4


def _log(meta: Path, name: str, entries: list[dict[str, object]]) -> None:
    meta.mkdir(parents=True, exist_ok=True)
    (meta / name).write_text("v1\n" + "".join(json.dumps(e) + "\n" for e in entries))


def test_committed_files_follow_the_newest_compact_log_and_deletes(tmp_path: Path) -> None:
    meta = tmp_path / "_spark_metadata"

    def add(name: str) -> dict[str, object]:
        return {"path": (tmp_path / name).as_uri(), "size": 7, "isDir": False, "action": "add"}

    _log(meta, "0", [add("stale-a.parquet")])  # superseded by 1.compact (Spark may also delete it)
    _log(meta, "1.compact", [add("a.parquet"), add("b.parquet")])
    _log(meta, "2", [add("c.parquet"), {**add("a.parquet"), "action": "delete"}])
    (meta / "3.tmp").write_text("in progress")  # not a log file
    assert [Path(f.path).name for f in committed_files(tmp_path)] == ["b.parquet", "c.parquet"]
    assert newest_batch(tmp_path) == 2
    assert committed_files(tmp_path / "nothing") == [] and newest_batch(tmp_path / "nothing") is None
