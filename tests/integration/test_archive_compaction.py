"""Compaction of the archive's small files on real Kafka and Spark: ``hearth archive compact`` rewrites
each closed day's files into one sorted file; afterwards Spark (through the sink's commit log) and pyarrow
(through ``committed_files``) read the same rows, each once, ``hearth archive verify`` passes, the replaced
files are gone, and the archive job goes on appending (its next ``.compact`` log file keeps the
compacted file) with every fact still archived once."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from hearth.groups.archive_cli import archive_app, inspect_archive
from hearth_analytics.archive_files.archive_table import committed_files, journal_ranges, read_columns
from hearth_analytics.jobs.archive import start_archive
from hearth_analytics.settings import AnalyticsSettings
from hearth_shared.adapters.archive_log import log_files
from hearth_shared.adapters.settings import StackSettings
from tests.support.archive import facts_across_days, produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

FIRST, LATER, DEVICES = 3_000, 600, 12
PER_TRIGGER = 300  # 10 micro-batches for the first run, each writing a file per day
LOG_COMPACT_INTERVAL = "3"  # the sink writes <id>.compact every 3 batches (10 by default)


@pytest.fixture
def sink_log_every_3(spark: Any) -> Iterator[None]:
    key = "spark.sql.streaming.fileSink.log.compactInterval"
    spark.conf.set(key, LOG_COMPACT_INTERVAL)
    yield
    spark.conf.unset(key)


def offsets(table: Path) -> Counter[tuple[int, int]]:
    rows = read_columns(table, ["kafka_partition", "kafka_offset"])
    pairs = zip(
        rows.column("kafka_partition").to_pylist(), rows.column("kafka_offset").to_pylist(), strict=True
    )
    return Counter(pairs)


def spark_offsets(spark: Any, table: Path) -> Counter[tuple[int, int]]:
    rows = spark.read.parquet(str(table)).select("kafka_partition", "kafka_offset").collect()
    return Counter((r["kafka_partition"], r["kafka_offset"]) for r in rows)


@pytest.mark.usefixtures("sink_log_every_3")
async def test_compaction_keeps_every_row_once_for_spark_and_pyarrow_and_the_job_goes_on(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    records = facts_across_days(stack, FIRST + LATER, DEVICES)
    await produce(stack, records[:FIRST])
    table = tmp_path / "archive"
    settings = AnalyticsSettings(
        stack=stack, checkpoint_dir=tmp_path / "ckpt", archive_url=str(table),
        archive_max_offsets_per_trigger=PER_TRIGGER,
    )  # fmt: skip
    start_archive(spark, settings, once=True).awaitTermination()
    before = offsets(table)
    assert sum(before.values()) == len(before) == FIRST
    files_before = committed_files(table)
    newest_compact = log_files(table)[0][0]
    assert newest_compact.compact, "the sink should have written a .compact log file"

    cli = await asyncio.to_thread(
        CliRunner().invoke, archive_app, ["compact", "--table", str(table), "--grace", "0"]
    )
    assert cli.exit_code == 0, cli.output
    assert "2026-11-20" in cli.output and "2026-11-21" in cli.output

    files_after = committed_files(table)
    compacted = [Path(f.path) for f in files_after if Path(f.path).name.startswith("part-compacted-")]
    assert {p.parent.name for p in compacted} == {"day=2026-11-20", "day=2026-11-21"}
    assert len(files_after) < len(files_before)
    gone = {Path(f.path) for f in files_before} - {Path(f.path) for f in files_after}
    assert gone and not any(p.exists() for p in gone)  # replaced, then purged (grace 0)
    for path in compacted:  # one file a day, sorted by partition and offset
        rows = pq.read_table(path, columns=["kafka_partition", "kafka_offset"]).to_pylist()
        keys = [(r["kafka_partition"], r["kafka_offset"]) for r in rows]
        assert keys == sorted(keys)
    assert offsets(table) == before  # pyarrow: the same rows, each once
    assert spark_offsets(spark, table) == before  # Spark, through the sink's commit log: the same
    report = inspect_archive(table, await journal_ranges(stack), complete=True)
    assert report.check.ok, report.check.problems()
    assert report.uncommitted_files == 0

    await produce(stack, records[FIRST:])
    start_archive(spark, settings, once=True).awaitTermination()  # the job appends after compaction
    assert log_files(table)[0][0].batch > newest_compact.batch  # it wrote its next .compact file ...
    assert set(compacted) <= {Path(f.path) for f in committed_files(table)}  # ... from the compacted one
    after = offsets(table)
    assert max(after.values()) == 1 and len(after) == FIRST + LATER
    assert spark_offsets(spark, table) == after
    assert inspect_archive(table, await journal_ranges(stack), complete=True).check.ok
