"""Batch replay rate: journal records per second through the daily-report batch job, against the floor.

A temporary broker's journal is filled with ``journal_facts`` (``JournalFacts``, as in the rebuild bench:
registrations, then mostly telemetry, now and then a command run to convergence, an anomaly, a
connectivity blip) until it holds at least ``events`` telemetry facts (``device.state_reported``). The
floor is a raw aiokafka read of that journal, in the same run. Then, in one local SparkSession (the
job's own settings: ``local[2]``, the Kafka connector jars resolved by ``hearth_analytics.spark``):

1. ``read + parse``: the job's Kafka source (``format("kafka")``, earliest to latest offsets) and its JSON
   parsing (``parse_journal``), counted: what Spark's connector costs before any report is computed;
2. ``batch report``: ``hearth_analytics.jobs.batch.run_batch`` as `hearth analytics batch` runs it: the same
   read, the per-device and per-home daily tables written as Parquet, the charts and the summary.

Rates are journal records (all facts) per second of wall time of each step, session start excluded
(a trivial action runs first).
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from hearth_bench.figures.results import ratio_rows
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import BenchStack, bench_stack, counting_progress, raw_consume_rate
from hearth_devstack.workload.journal_facts import JournalFacts, fill_journal
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import Event, StateReported

console = Console(stderr=True)
T = TypeVar("T")
TELEMETRY_SHARE = 0.93  # of JournalFacts' facts are readings (about 0.94): the first fill is sized by it


class CountingFacts:
    """The facts of a generator, counting them and the telemetry among them as they are taken."""

    def __init__(self, facts: Iterator[Event]) -> None:
        self.facts = facts
        self.total = 0
        self.telemetry = 0

    def __iter__(self) -> CountingFacts:
        return self

    def __next__(self) -> Event:
        event = next(self.facts)
        self.total += 1
        if isinstance(event, StateReported):
            self.telemetry += 1
        return event


def fill_with_telemetry(
    stack_settings: StackSettings, devices: int, telemetry: int
) -> tuple[int, int, float]:
    """Append facts until the journal holds ``telemetry`` readings: (facts, readings, seconds)."""
    facts = CountingFacts(iter(JournalFacts(devices)))
    began = time.perf_counter()
    with counting_progress() as progress:
        task = progress.add_task("filling the journal (telemetry facts)", total=telemetry)
        while facts.telemetry < telemetry:
            more = math.ceil((telemetry - facts.telemetry) / TELEMETRY_SHARE) + 100
            asyncio.run(
                fill_journal(
                    stack_settings, facts, more, lambda _n: progress.update(task, completed=facts.telemetry)
                )
            )
    return facts.total, facts.telemetry, time.perf_counter() - began


def timed_spark_job(spark: Any, what: str, job: Callable[[], T]) -> tuple[T, float]:
    """Run ``job`` (Spark actions) in a thread while a bar shows the tasks of its active stages; returns
    its result and its wall time."""
    tracker = spark.sparkContext.statusTracker()
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = job()
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error
        finally:
            done.set()

    began = time.perf_counter()
    worker = threading.Thread(target=run, name=f"bench-{what}", daemon=True)
    worker.start()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[tasks]}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task(what, total=None, tasks="")
        while not done.wait(0.5):
            stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            stages = [s for s in stages if s is not None]
            total = sum(s.numTasks for s in stages)
            completed = sum(s.numCompletedTasks for s in stages)
            label = f"stages {', '.join(str(s.stageId) for s in stages)}: {completed}/{total} tasks"
            progress.update(task, tasks=label if stages else "")
    seconds = time.perf_counter() - began
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"], seconds


def run_batch_bench(stack: BenchStack, work: Path, *, devices: int, events: int) -> dict[str, Any]:
    from hearth_analytics.jobs.batch import run_batch
    from hearth_analytics.settings import AnalyticsSettings
    from hearth_analytics.sources.schema import parse_journal, read_journal
    from hearth_analytics.spark import build_session

    settings = stack.settings
    facts, telemetry, fill_s = fill_with_telemetry(settings, devices, events)
    console.print(
        f"filled {facts:,} facts ({telemetry:,} readings) in {fill_s:.0f} s ({facts / fill_s:,.0f}/s)"
    )
    floor = asyncio.run(raw_consume_rate(settings, settings.topics.journal, facts, max_records=20_000))
    console.print(f"floor: raw aiokafka consume of the journal {floor:,.0f} records/s")

    analytics = AnalyticsSettings(
        stack=settings, checkpoint_dir=work / "checkpoints", output_dir=work / "reports"
    )
    began = time.perf_counter()
    spark = build_session(analytics, "hearth-bench-batch")
    spark.range(1).count()
    session_s = time.perf_counter() - began
    console.print(f"SparkSession ({analytics.master or 'local[2]'}) ready in {session_s:.1f} s")
    try:
        counted, read_s = timed_spark_job(
            spark,
            "Spark: read + parse the journal",
            lambda: parse_journal(read_journal(spark, analytics)).count(),
        )
        console.print(f"read + parse: {counted:,} facts in {read_s:.1f} s ({counted / read_s:,.0f}/s)")
        report, report_s = timed_spark_job(
            spark,
            "Spark: batch report (hearth analytics batch)",
            lambda: run_batch(analytics, spark=spark, output_dir=work / "reports"),
        )
        console.print(
            f"batch report: {report.facts:,} facts in {report_s:.1f} s ({report.facts / report_s:,.0f}/s)"
        )
    finally:
        spark.stop()
    if counted != facts or report.facts != facts:
        raise RuntimeError(
            f"Spark read {counted:,} and {report.facts:,} facts of the {facts:,} in the journal"
        )

    read_rate, report_rate = facts / read_s, facts / report_s
    return {
        "title": "batch replay of the journal (daily report on Spark)",
        "devices": devices,
        "facts": facts,
        "telemetry_facts": telemetry,
        "fill_s": round(fill_s, 1),
        "floor_consume_per_s": round(floor),
        "spark_session_s": round(session_s, 1),
        "read_parse_s": round(read_s, 1),
        "read_parse_rows_per_s": round(read_rate),
        "report_s": round(report_s, 1),
        "report_rows_per_s": round(report_rate),
        "report_telemetry_rows_per_s": round(telemetry / report_s),
        "ratio_to_floor": round(report_rate / floor, 3),
        "device_days": report.device_days,
        "rows": ratio_rows(
            "rows/s",
            ("raw aiokafka consume of the journal (floor)", floor),
            ("Spark: Kafka source read + JSON parse, counted", read_rate),
            ("Spark: batch report (hearth analytics batch)", report_rate),
        ),
        "notes": (
            f"{facts:,} journal facts of {devices:,} devices, {telemetry:,} of them telemetry "
            '(device.state_reported), read by Spark with format("kafka") from the earliest to the latest '
            f"offsets; rows/s = journal facts / wall time of the step. The report ({report_s:.0f} s; "
            f"{telemetry / report_s:,.0f} telemetry rows/s) reads the journal once, caches the parsed facts "
            f"and writes {report.device_days:,} device-day rows and the home table as Parquet, then the "
            f"charts. local[2] on a 2-core machine, shuffle partitions {analytics.shuffle_partitions}, "
            f"driver memory {analytics.driver_memory}; the SparkSession took {session_s:.0f} s to start (not "
            "counted). The floor is one Python consumer that only counts records; Spark decodes every JSON "
            "value into typed columns."
        ),
    }


@dataclass(frozen=True)
class BatchBench:
    """Batch replay rate of the Spark daily report against the raw consume rate (temporary broker)."""

    events: int = option(5_000_000, "Telemetry facts the journal holds (at least)")
    devices: int = option(10_000, "Devices the facts are spread over")


def main(params: BatchBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    with (
        tempfile.TemporaryDirectory(prefix="hearth-bench-batch-spark-") as tmp,
        bench_stack("batch", services=(), databases=False) as stack,
    ):
        result = run_batch_bench(stack, Path(tmp), devices=params.devices, events=params.events)
    path = write_result("batch", result)
    console.print(
        f"batch report: {result['report_rows_per_s']:,} rows/s, {result['ratio_to_floor']:.1%} of the raw "
        f"consume rate; written to {path}"
    )
    return result
