"""A report's parts kept per archive day (``hearth_analytics.sources.archive_day_parts``), on real Spark
over a table written as the file sink leaves it: unchanged days are read back, a day whose files changed
(compacted here) is computed again, every row once and the tail's start right each time; the runs stay
few (copied into one past ``MAX_RUNS``, the unused ones deleted) and parts of another version are never
read; a reader that may not write the table computes every day and keeps none, and a manifest that
cannot be read counts as none. (The daily report over kept parts equals the journal alone:
``test_archive_history``.)"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame

from hearth.groups.archive_cli import inspect_archive
from hearth_analytics.archive_files.archive_check import OffsetRange
from hearth_analytics.archive_files.archive_compact import compact_archive
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources import archive_day_parts
from hearth_analytics.sources.archive_day_parts import ARCHIVE_DAY, DayParts
from hearth_shared.adapters.archive_store import ArchiveStore
from tests.support.archive import write_table_by_hand

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

FIRST, SECOND = "2026-11-20", "2026-11-21"
BATCHES = [  # {day: [(partition, offset), ...]} per micro-batch: FIRST gets two files, SECOND one
    {FIRST: [(0, 0), (0, 1), (1, 0)], SECOND: [(0, 2), (1, 1)]},
    {FIRST: [(0, 3), (1, 2), (1, 3)]},
]
ROWS = sorted((day, p, o) for batch in BATCHES for day, rows in batch.items() for p, o in rows)


def _offsets(rows: DataFrame) -> dict[str, DataFrame]:
    return {"offsets": rows.select(ARCHIVE_DAY, "kafka_partition", "kafka_offset")}


def _parts(spark: Any, settings: AnalyticsSettings, version: int = 1) -> DayParts:
    parts = archive_day_parts.archive_day_parts(spark, settings, "test", version, _offsets)
    assert parts is not None
    assert sorted(tuple(r) for r in parts.frames["offsets"].collect()) == sorted((p, o) for _, p, o in ROWS)
    assert parts.ends == {0: 4, 1: 4} and parts.days == 2
    return parts


def _runs(table: Path) -> list[list[str]]:
    """The days each kept run holds (by its manifest: a run without one is never read)."""
    manifests = (table / archive_day_parts.PARTS_DIR).glob("*/*/manifest.json")
    return sorted(sorted(json.loads(m.read_text())["days"]) for m in manifests)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """``BATCHES`` written as the file sink leaves them."""
    write_table_by_hand(tmp_path / "archive", BATCHES, compact_at=1)
    return tmp_path / "archive"


@pytest.fixture
def settings(table: Path, tmp_path: Path) -> AnalyticsSettings:
    return AnalyticsSettings(archive_url=str(table), checkpoint_dir=tmp_path / "ckpt")


def test_unchanged_days_are_read_back_and_a_changed_day_is_computed_again(
    spark: Any, table: Path, settings: AnalyticsSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert archive_day_parts.archive_day_parts(
        spark, settings.model_copy(update={"archive_url": str(tmp_path / "none")}), "test", 1, _offsets
    ) is None  # fmt: skip

    assert _parts(spark, settings).computed == (FIRST, SECOND)
    assert _parts(spark, settings).computed == ()
    assert _runs(table) == [[FIRST, SECOND]]
    kept = inspect_archive(table, {0: OffsetRange(0, 4), 1: OffsetRange(0, 4)}, complete=True)
    assert kept.check.ok and kept.uncommitted_files == 0  # the kept parts are not the table's files

    assert [d.day for d in compact_archive(table, before=date(2026, 11, 22), grace_s=0).days] == [FIRST]
    assert _parts(spark, settings).computed == (FIRST,)
    assert _runs(table) == [[FIRST], [FIRST, SECOND]]

    monkeypatch.setattr(archive_day_parts, "MAX_RUNS", 1)  # two runs in use: copied into one
    monkeypatch.setattr(archive_day_parts, "STALE_AFTER_S", -1.0)  # and the unused ones deleted at once
    assert _parts(spark, settings).computed == ()
    assert _runs(table) == [[FIRST, SECOND]]

    assert _parts(spark, settings, version=2).computed == (FIRST, SECOND)  # nothing of version 1 read
    assert _runs(table) == [[FIRST, SECOND]]  # and version 1's run deleted


def test_a_reader_that_may_not_write_the_table_computes_every_day_and_keeps_none(
    spark: Any, table: Path, settings: AnalyticsSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(store: ArchiveStore, path: str, text: str) -> None:
        raise PermissionError(f"{path}: this reader may not write the table")

    monkeypatch.setattr(ArchiveStore, "write_whole", refused)  # no run gets its manifest
    for _ in range(2):
        assert _parts(spark, settings).computed == (FIRST, SECOND)  # every row once, all the same
    assert _runs(table) == []


def test_a_manifest_that_cannot_be_read_is_as_none_and_its_days_are_computed_again(
    spark: Any, table: Path, settings: AnalyticsSettings
) -> None:
    assert _parts(spark, settings).computed == (FIRST, SECOND)
    (manifest,) = (table / archive_day_parts.PARTS_DIR).glob("*/*/manifest.json")
    manifest.write_text('{"days": ["not', encoding="utf-8")  # cut short, by hand or a broken disk
    assert _parts(spark, settings).computed == (FIRST, SECOND)
    (new,) = set((table / archive_day_parts.PARTS_DIR).glob("*/*/manifest.json")) - {manifest}
    assert sorted(json.loads(new.read_text())["days"]) == [FIRST, SECOND]
