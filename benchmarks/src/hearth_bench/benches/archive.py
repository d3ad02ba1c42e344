"""``hearth bench archive``: the archive job's sustained rate, the daily report from the archive, and a
rebuild of the read models from it, each against its floor in the same run.

A temporary broker's journal is filled as for ``bench batch`` (``fill_with_telemetry``: registrations,
then mostly telemetry, commands, anomalies). The floor is a raw aiokafka read of that journal in the
same run. Then, in one local SparkSession (the jobs' own settings, ``local[2]``):

1. ``archive``: ``hearth_analytics.jobs.archive`` with ``Trigger.AvailableNow`` over the whole backlog, in
   micro-batches of ``archive_max_offsets_per_trigger``: the sustained rate of the streaming job when it
   has more to do than it can take (facts / wall time, query start included);
2. ``scan``: a plain columnar scan of the archive table (the sum of the records' lengths: every value
   read), the floor for reports that read the archive;
3. ``report (Kafka)`` and ``report (archive)``: ``build_report`` over the journal alone and over the
   archive (plus its empty tail), twice: first computing and keeping each archive day's parts
   (``archive_day_parts``), then again with the kept parts read back, as every later report over a day
   that did not change; same figures (checked);
4. ``backtest (Kafka)`` and ``backtest (archive)``: ``spark_backtest`` of one automation per home
   (``backtest_automations``: a state trigger on the home's first thermostat) over every fact, from the
   journal alone, then from the archive (its Python workers warm by then), same results (checked).

Then, Spark stopped (it would take the cores the replay needs), the read models are rebuilt twice into
fresh schemas as ``hearth rebuild`` does: from the journal (the floor: what the archive replaces) and
``--from-archive`` (the archive with pyarrow, then the journal's tail, empty here); events / replay time
each, and both views compared row by row (they must be equal).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from hearth_bench.benches.batch_replay import fill_with_telemetry, timed_spark_job
from hearth_bench.benches.rebuild import rebuild_with_progress
from hearth_bench.figures.results import ratio_rows
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import BenchStack, bench_stack, raw_consume_rate
from hearth_bench.load.automation_fleet import cool_when_hot
from hearth_devstack.workload.journal_facts import DEVICES_PER_HOME, START, JournalFacts
from hearth_shared.domain.automation import Automation
from hearth_shared.schema.events import utcnow

console = Console(stderr=True)


def run_archive_bench(stack: BenchStack, work: Path, *, devices: int, events: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from hearth_analytics.jobs.archive import start_archive
    from hearth_analytics.jobs.automation_backtest import spark_backtest
    from hearth_analytics.jobs.batch import build_report
    from hearth_analytics.settings import AnalyticsSettings
    from hearth_analytics.spark import build_session

    settings = stack.settings
    facts, telemetry, fill_s = fill_with_telemetry(settings, devices, events)
    console.print(f"filled {facts:,} facts ({telemetry:,} readings) in {fill_s:.0f} s")
    floor = asyncio.run(raw_consume_rate(settings, settings.topics.journal, facts, max_records=20_000))
    console.print(f"floor: raw aiokafka consume of the journal {floor:,.0f} records/s")

    archived = AnalyticsSettings(
        stack=settings, checkpoint_dir=work / "checkpoints", output_dir=work / "reports",
        archive_url=str(work / "archive"),
    )  # fmt: skip
    journal_only = archived.model_copy(update={"archive_url": str(work / "no-archive")})
    began = time.perf_counter()
    spark = build_session(archived, "hearth-bench-archive")
    spark.range(1).count()
    session_s = time.perf_counter() - began
    try:
        _, archive_s = timed_spark_job(
            spark,
            "Spark: archive the journal",
            lambda: start_archive(spark, archived, once=True).awaitTermination(),
        )
        table = spark.read.parquet(archived.archive_location())
        (rows, length), scan_s = timed_spark_job(
            spark,
            "Spark: scan the archive",
            lambda: tuple(table.select(F.count("*"), F.sum(F.length("value"))).collect()[0]),
        )
        from_kafka, kafka_s = timed_spark_job(
            spark, "Spark: report from Kafka", lambda: build_report(spark, journal_only, work / "r-kafka")
        )
        from_archive, archive_report_s = timed_spark_job(
            spark, "Spark: report from the archive", lambda: build_report(spark, archived, work / "r-archive")
        )
        from_kept, kept_report_s = timed_spark_job(
            spark,
            "Spark: report from the archive, kept parts",
            lambda: build_report(spark, archived, work / "r-kept"),
        )
        automations = backtest_automations(devices)
        stretch = (START - timedelta(days=1), utcnow() + timedelta(days=1))  # every fact, every record
        backtest_kafka, backtest_kafka_s = timed_spark_job(
            spark,
            "Spark: backtest from Kafka",
            lambda: spark_backtest(spark, journal_only, automations, *stretch),
        )
        backtest_archive, backtest_archive_s = timed_spark_job(
            spark,
            "Spark: backtest from the archive",
            lambda: spark_backtest(spark, archived, automations, *stretch),
        )
    finally:
        spark.stop()
    if backtest_kafka != backtest_archive:
        raise RuntimeError("the backtests from the archive and from Kafka differ")
    fired = sum(r.fired for r in backtest_archive.values())
    if (backtest_facts := sum(r.facts for r in backtest_archive.values())) != facts:
        raise RuntimeError(f"{facts:,} facts in the journal, the backtest read {backtest_facts:,}")
    if rows != facts or {from_kafka.facts, from_archive.facts, from_kept.facts} != {facts}:
        saw = f"{from_kafka.facts:,}, {from_archive.facts:,} and {from_kept.facts:,}"
        raise RuntimeError(f"{facts:,} facts in the journal, {rows:,} archived, reports saw {saw}")
    if from_archive.archive_days_computed != from_archive.archive_days or from_kept.archive_days_computed:
        raise RuntimeError("the first report from the archive should compute every day, the second none")
    _same_report(from_kafka.homes, from_archive.homes)
    _same_report(from_kafka.homes, from_kept.homes)
    rebuilt = rebuild_figures(stack, work / "archive", facts)
    table_files = [p for p in (work / "archive").rglob("*.parquet") if "_report_parts" not in p.parts]
    files, size = len(table_files), sum(p.stat().st_size for p in table_files)
    kept_size = sum(p.stat().st_size for p in (work / "archive" / "_report_parts").rglob("*.parquet"))
    archive_rate, scan_rate = facts / archive_s, facts / scan_s
    kafka_rate, archive_report_rate = facts / kafka_s, facts / archive_report_s
    kept_report_rate = facts / kept_report_s
    backtest_kafka_rate, backtest_archive_rate = facts / backtest_kafka_s, facts / backtest_archive_s
    return {
        "title": "the journal's archive (Parquet on Spark): archive job, scan, daily report",
        "devices": devices,
        "facts": facts,
        "telemetry_facts": telemetry,
        "floor_consume_per_s": round(floor),
        "spark_session_s": round(session_s, 1),
        "archive_s": round(archive_s, 1),
        "archive_facts_per_s": round(archive_rate),
        "archive_ratio_to_floor": round(archive_rate / floor, 3),
        "archive_files": files,
        "archive_bytes": size,
        "value_bytes": int(length or 0),
        "scan_rows_per_s": round(scan_rate),
        "report_kafka_rows_per_s": round(kafka_rate),
        "report_archive_rows_per_s": round(archive_report_rate),
        "report_speedup": round(archive_report_rate / kafka_rate, 2),
        "report_archive_ratio_to_scan": round(archive_report_rate / scan_rate, 3),
        "report_kept_rows_per_s": round(kept_report_rate),
        "report_kept_speedup": round(kept_report_rate / kafka_rate, 2),
        "report_kept_ratio_to_scan": round(kept_report_rate / scan_rate, 3),
        "report_archive_days": from_archive.archive_days,
        "report_kept_bytes": kept_size,
        "backtest_automations": len(automations),
        "backtest_fired": fired,
        "backtest_kafka_facts_per_s": round(backtest_kafka_rate),
        "backtest_archive_facts_per_s": round(backtest_archive_rate),
        "backtest_archive_ratio_to_floor": round(backtest_archive_rate / floor, 3),
        **rebuilt,
        "rows": ratio_rows(
            "facts/s",
            ("raw aiokafka consume of the journal (floor)", floor),
            ("archive job (Structured Streaming, availableNow, Parquet)", archive_rate),
            ("plain columnar scan of the archive", scan_rate),
            ("daily report from Kafka", kafka_rate),
            (
                "daily report from the archive (first: computes and keeps each day's parts)",
                archive_report_rate,
            ),
            ("daily report from the archive (later: the kept parts read back)", kept_report_rate),
            ("automation backtest from Kafka", backtest_kafka_rate),
            ("automation backtest from the archive", backtest_archive_rate),
            ("rebuild of the read models from the journal", rebuilt["rebuild_journal_events_per_s"]),
            ("rebuild --from-archive", rebuilt["rebuild_archive_events_per_s"]),
        ),
        "notes": (
            f"{facts:,} journal facts of {devices:,} devices ({telemetry:,} telemetry). The archive job ran "
            f"over the whole backlog with Trigger.AvailableNow in micro-batches of up to "
            f"{archived.archive_max_offsets_per_trigger:,} records ({files} Parquet files, "
            f"{size / 1e6:.1f} MB zstd for {int(length or 0) / 1e6:.1f} MB of JSON values). local[2] on a "
            f"2-core machine shared with other work; SparkSession start ({session_s:.0f} s) not counted. "
            "The reports' figures were checked equal; the first report from the archive computed the "
            f"parts of its {from_archive.archive_days} archive day(s) and kept them "
            f"({kept_size / 1e6:.1f} MB), the second read them back. The backtests: one automation per home "
            f"({len(automations):,}, each a state trigger on the home's first thermostat; "
            f"{fired:,} runs), over every fact, from Kafka first, "
            "then from the archive; their results were checked equal. The two rebuilds (2 replay processes "
            "each, batches of "
            f"{REBUILD_BATCH:,}) ran after Spark stopped, from the journal first; their views were compared "
            "row by row: equal."
        ),
    }


REBUILD_BATCH = 50_000
HOT_C = 23.5  # a bench thermostat's reading is drawn from 18-24 °C: one in about eight is above


def backtest_automations(devices: int) -> list[Automation]:
    """One automation per home of ``JournalFacts(devices)``: cool the home's first thermostat (an even
    device: its first) when it reads above ``HOT_C``."""
    journal = JournalFacts(devices)
    found = []
    for first in range(0, devices, DEVICES_PER_HOME):
        thermostat, home, _ = journal.device(first)
        automation_id = uuid.uuid5(uuid.NAMESPACE_URL, f"hearth-bench-archive/{home}")
        found.append(cool_when_hot(automation_id, home, thermostat, HOT_C, START))
    return found


def _same_report(from_kafka: pd.DataFrame, from_archive: pd.DataFrame) -> None:
    """Both reports equal, row by row in (day, home) order: counts exactly, means to 1e-9 relative (Spark
    sums a mean's parts in the order its tasks finish, which differs between the two sources)."""

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.sort_values(["day", "home_id"]).reset_index(drop=True)

    try:
        pd.testing.assert_frame_equal(
            ordered(from_kafka), ordered(from_archive), check_exact=False, rtol=1e-9
        )
    except AssertionError as differs:
        raise RuntimeError(f"the reports from the archive and from Kafka differ: {differs}") from None


def rebuild_figures(stack: BenchStack, table: Path, facts: int) -> dict[str, Any]:
    """The read models rebuilt from the journal and from the archive: events/s each, views equal."""
    from hearth_read_models.rebuild.run import COMPARED
    from hearth_read_models.rebuild.table_diff import compare_table
    from hearth_read_models.settings import ReadModelSettings
    from hearth_read_models.store.db import connect

    prefix = stack.settings.topic_prefix
    journal = ReadModelSettings(stack=stack.settings, schema_name=f"{prefix}_journal")
    archive = ReadModelSettings(stack=stack.settings, schema_name=f"{prefix}_archive")
    by_journal = rebuild_with_progress(journal, "rebuild from the journal", facts, batch_size=REBUILD_BATCH)
    by_archive = rebuild_with_progress(
        archive, "rebuild --from-archive", facts, batch_size=REBUILD_BATCH, archive=table
    )

    async def differences() -> int:
        async with await connect(stack.settings.postgres_dsn, journal.schema_name) as conn:
            return sum(
                [
                    (await compare_table(conn, t, journal.schema_name, archive.schema_name))[1]
                    for t in COMPARED
                ]
            )

    differing = asyncio.run(differences())
    if differing or by_archive.events != by_journal.events or by_archive.from_archive != facts:
        raise RuntimeError(f"rebuild from the archive: {by_archive.events:,} records "
                           f"({by_archive.from_archive:,} archived), {differing:,} rows differ from the "
                           f"rebuild from the journal ({by_journal.events:,} records)")  # fmt: skip
    console.print(f"rebuild: {by_journal.events_per_s:,.0f} events/s from the journal, "
                  f"{by_archive.events_per_s:,.0f}/s from the archive; views equal")  # fmt: skip
    return {
        "rebuild_journal_events_per_s": round(by_journal.events_per_s),
        "rebuild_archive_events_per_s": round(by_archive.events_per_s),
        "rebuild_archive_ratio": round(by_archive.events_per_s / by_journal.events_per_s, 3),
        "rebuild_journal_replay_s": round(by_journal.replay_s, 1),
        "rebuild_archive_replay_s": round(by_archive.replay_s, 1),
    }


@dataclass(frozen=True)
class ArchiveBench:
    """The archive job's sustained facts/s, and the daily report from the archive, against floors."""

    events: int = option(200_000, "Telemetry facts the journal holds (at least)")
    devices: int = option(1_000, "Devices the facts are spread over")


def main(params: ArchiveBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    with (
        tempfile.TemporaryDirectory(prefix="hearth-bench-archive-") as tmp,
        bench_stack("archive", services=()) as stack,
    ):
        result = run_archive_bench(stack, Path(tmp), devices=params.devices, events=params.events)
    path = write_result("archive", result)
    console.print(
        f"archive job: {result['archive_facts_per_s']:,} facts/s, "
        f"{result['archive_ratio_to_floor']:.1%} of the raw consume rate; report from the archive "
        f"{result['report_speedup']}x the one from Kafka (its kept parts read back: "
        f"{result['report_kept_speedup']}x); rebuild from the archive "
        f"{result['rebuild_archive_ratio']}x the one from the journal; {path}"
    )
    return result
