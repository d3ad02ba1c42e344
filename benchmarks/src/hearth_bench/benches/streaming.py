"""Streaming capacity: the highest telemetry rate the streaming job keeps up with, and its micro-batch
latency at that rate, against the floor.

The real queries of `hearth analytics stream` (``hearth_analytics.jobs.stream``: ``hearth-rollups`` and
``hearth-training``, the job's default settings unless told otherwise) run in one local SparkSession in
this process over a temporary broker's journal. A separate producer process appends journal facts
(``JournalFacts``, as in the rebuild bench, event time = wall time) open loop at stepped rates, a fixed
time per step. During each step the bench reads each query's progress (``recentProgress``: rows,
``inputRowsPerSecond``, ``processedRowsPerSecond``, ``durationMs.triggerExecution``) and samples its
backlog: the journal's end offsets minus the end offsets of the query's last finished micro-batch.

A query keeps up at a step when its micro-batches processed at least as many rows per second of batch
time as arrived, and its backlog at the end of the step is bounded: no more than what arrives in two of
its trigger intervals (what a query that is at most one micro-batch behind can have). The sustained rate
is the highest step at which both queries keep up; the steps stop at the first one where either falls
behind. The floor is a raw aiokafka read of the same journal after the steps (same broker, same run).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from hearth_bench.harness.load_client import latency_ms
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import BenchStack, bench_stack, raw_consume_rate
from hearth_devstack.workload.journal_facts import JournalFacts
from hearth_shared.adapters.kafka import make_producer, topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import encode

console = Console(stderr=True)
TICK_S = 0.05  # the producer's pacing step
SAMPLE_S = 1.0  # how often the bench reads progress and backlogs
DEFAULT_RATES = (500.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0)


# ------------------------------------------------------------------------------ the producer process


def produce(bootstrap: str, prefix: str, devices: int, start_at: float, schedule: list[tuple[float, float]],
            report: Any) -> None:  # fmt: skip
    """Child process: from ``start_at`` (wall clock), append facts at each (rate, seconds) of the schedule,
    open loop; put (step, sent, seconds late at most) on ``report`` after each step."""
    asyncio.run(_produce(bootstrap, prefix, devices, start_at, schedule, report))


async def _produce(bootstrap: str, prefix: str, devices: int, start_at: float,
                   schedule: list[tuple[float, float]], report: Any) -> None:  # fmt: skip
    topic = StackSettings(kafka_bootstrap_servers=bootstrap, topic_prefix=prefix).topics.journal
    facts = JournalFacts(devices)
    stream = iter(facts)
    producer = make_producer(bootstrap, "bench-stream", linger_ms=20)
    await producer.start()
    try:
        step_start = start_at
        for step, (rate, seconds) in enumerate(schedule):
            sent, owed, late, ticks = 0, 0.0, 0.0, round(seconds / TICK_S)
            for k in range(ticks):
                due = step_start + k * TICK_S
                if (wait := due - time.time()) > 0:
                    await asyncio.sleep(wait)
                late = max(late, time.time() - due)
                facts.clock = datetime.now(UTC)  # event time: now (the generator adds 1 ms per fact)
                owed += rate * TICK_S
                while owed >= 1:
                    event = next(stream)
                    await producer.send(topic, encode(event), key=event.device_id.encode())
                    sent += 1
                    owed -= 1
            await producer.flush()
            report.put((step, sent, late))
            step_start += seconds
    finally:
        await producer.stop()


# ------------------------------------------------------------------------------------ measurement


@dataclass
class StepFigures:
    rate: float
    seconds: float
    produced: int = 0
    producer_late_s: float = 0.0
    batches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # query -> its progress dicts
    backlog: dict[str, list[int]] = field(default_factory=dict)  # query -> sampled backlogs

    def keeps_up(self, query: str, trigger_s: float) -> bool:
        batches = [b for b in self.batches.get(query, []) if b["numInputRows"]]
        if not batches or not self.backlog.get(query):
            return False
        rows = sum(b["numInputRows"] for b in batches)
        busy_s = sum(b["durationMs"]["triggerExecution"] for b in batches) / 1000
        processed_per_s = rows / busy_s if busy_s else float("inf")
        return processed_per_s >= self.rate and self.backlog[query][-1] <= 2 * trigger_s * self.rate

    def row(self, query: str, trigger_s: float) -> dict[str, Any]:
        batches = [b for b in self.batches.get(query, []) if b["numInputRows"]]
        durations = latency_ms([b["durationMs"]["triggerExecution"] / 1000 for b in batches])
        backlog = self.backlog.get(query) or [0]

        def mean(key: str) -> float:
            return sum(b[key] or 0 for b in batches) / len(batches) if batches else 0.0

        return {
            "rate/s": round(self.rate),
            "query": query,
            "batches": len(batches),
            "input rows/s": round(mean("inputRowsPerSecond")),
            "processed rows/s": round(mean("processedRowsPerSecond")),
            "batch p50 ms": durations.get("p50", ""),
            "batch p99 ms": durations.get("p99", ""),
            "backlog end": backlog[-1],
            "backlog max": max(backlog),
            "keeps up": "yes" if self.keeps_up(query, trigger_s) else "no",
        }


def _end_offsets(progress: dict[str, Any], topic: str) -> int:
    offsets = progress["sources"][0]["endOffset"]
    offsets = json.loads(offsets) if isinstance(offsets, str) else offsets
    return sum(int(v) for v in (offsets or {}).get(topic, {}).values())


class JournalEnd:
    """The journal's end offsets (summed), read on a loop of its own (the bench's main thread is sync)."""

    def __init__(self, settings: StackSettings) -> None:
        self.topic = settings.topics.journal
        self.loop = asyncio.new_event_loop()
        self.consumer = self.loop.run_until_complete(self._start(settings))

    async def _start(self, settings: StackSettings) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False
        )
        await consumer.start()
        self.tps = await topic_partitions(consumer, self.topic)
        return consumer

    def total(self) -> int:
        return sum(self.loop.run_until_complete(self.consumer.end_offsets(self.tps)).values())

    def close(self) -> None:
        self.loop.run_until_complete(self.consumer.stop())
        self.loop.close()


def run_streaming_bench(
    stack: BenchStack,
    work: Path,
    *,
    devices: int,
    rates: list[float],
    step_s: float,
    warmup_s: float,
    rollup_trigger_s: float | None,
    train_trigger_s: float | None,
) -> dict[str, Any]:
    from hearth_analytics.jobs.stream import ROLLUP_QUERY, TRAINING_QUERY, start_rollups, start_training
    from hearth_analytics.settings import AnalyticsSettings
    from hearth_analytics.spark import build_session

    settings = stack.settings
    analytics = AnalyticsSettings(
        stack=settings, checkpoint_dir=work / "checkpoints", output_dir=work / "out"
    )
    if rollup_trigger_s:
        analytics = analytics.model_copy(update={"rollup_trigger_s": rollup_trigger_s})
    if train_trigger_s:
        analytics = analytics.model_copy(update={"train_trigger_s": train_trigger_s})
    triggers = {ROLLUP_QUERY: analytics.rollup_trigger_s, TRAINING_QUERY: analytics.train_trigger_s}
    spark = build_session(analytics, "hearth-bench-stream")
    queries = [start_rollups(spark, analytics), start_training(spark, analytics)]
    journal = JournalEnd(settings)
    steps = [StepFigures(rates[0], warmup_s)] + [StepFigures(rate, step_s) for rate in rates]
    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    start_at = time.time() + 5.0  # time for the child to start
    schedule = [(s.rate, s.seconds) for s in steps]
    child = context.Process(
        target=produce,
        args=(settings.kafka_bootstrap_servers, settings.topic_prefix, devices, start_at, schedule, reports),
        daemon=True,
    )
    child.start()
    seen: set[tuple[str, int]] = set()
    sustained: StepFigures | None = None
    fell_behind: StepFigures | None = None
    try:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            step_end = start_at
            for i, step in enumerate(steps):
                step_start, step_end = step_end, step_end + step.seconds
                what = "warm-up" if i == 0 else f"step {i}/{len(steps) - 1}"
                task = progress.add_task(f"{what}: {step.rate:,.0f} facts/s", total=step.seconds, status="")
                while (now := time.time()) < step_end + SAMPLE_S:
                    time.sleep(SAMPLE_S)
                    for q in queries:
                        if q.exception() is not None:
                            raise RuntimeError(f"{q.name} failed: {q.exception()}")
                        done = [json.loads(p.json) for p in q.recentProgress]
                        fresh = [p for p in done if (q.name, p["batchId"]) not in seen]
                        seen.update((q.name, p["batchId"]) for p in fresh)
                        step.batches.setdefault(q.name, []).extend(fresh)
                        last = _end_offsets(done[-1], settings.topics.journal) if done else 0
                        if now >= step_start:
                            step.backlog.setdefault(q.name, []).append(journal.total() - last)
                    status = ", ".join(
                        f"{q.name[7:]} backlog {(step.backlog.get(q.name) or [0])[-1]:,}" for q in queries
                    )
                    progress.update(task, completed=min(now - step_start, step.seconds), status=status)
                _, step.produced, step.producer_late_s = reports.get(timeout=60)
                if i == 0:
                    continue
                if all(step.keeps_up(q.name, triggers[q.name]) for q in queries):
                    sustained = step
                else:
                    fell_behind = step
                    break
    finally:
        if child.is_alive():
            child.terminate()
        child.join(10)
        for q in queries:
            q.stop()
        journal_total = journal.total()
        journal.close()
        spark.stop()
    floor = asyncio.run(
        raw_consume_rate(settings, settings.topics.journal, journal_total, max_records=20_000)
    )
    console.print(f"floor: raw aiokafka consume of the journal {floor:,.0f} records/s")
    return _result(steps[1:], sustained, fell_behind, floor, triggers, analytics, devices, journal_total)


def _result(
    steps: list[StepFigures],
    sustained: StepFigures | None,
    fell_behind: StepFigures | None,
    floor: float,
    triggers: dict[str, float],
    analytics: Any,
    devices: int,
    journal_total: int,
) -> dict[str, Any]:
    run = [s for s in steps if s.batches]
    rows = [s.row(q, triggers[q]) for s in run for q in triggers]
    rate = sustained.rate if sustained else 0.0
    latency = {}
    if sustained:
        for q in triggers:
            batches = [b for b in sustained.batches[q] if b["numInputRows"]]
            latency[q] = latency_ms([b["durationMs"]["triggerExecution"] / 1000 for b in batches])
    late = max((s.producer_late_s for s in run), default=0.0)
    short = [s for s in run if s.produced < 0.98 * s.rate * s.seconds]
    notes = [
        f"Telemetry (JournalFacts: about 94 % device.state_reported, the rest registrations, command facts, "
        f"anomalies, connectivity changes) of {devices:,} devices in {devices // 10:,} homes, produced open "
        f"loop by a separate process, {steps[0].seconds:.0f} s per step after a warm-up. Both queries of "
        f"the streaming job ran in one local[2] SparkSession with the job's settings: rollup trigger "
        f"{analytics.rollup_trigger_s:g} s, at most {analytics.rollup_max_offsets_per_trigger:,} records per "
        f"rollup micro-batch, training trigger {analytics.train_trigger_s:g} s (each training micro-batch "
        "publishes a model version), shuffle partitions "
        f"{analytics.shuffle_partitions}. Batch latency = durationMs.triggerExecution of the micro-batches "
        "that had input; backlog = journal end offsets minus the end offsets of the query's last micro-batch "
        "(records). A step is kept up when the rows per second of batch time reach the rate and the backlog "
        "at the step's end is within two trigger intervals of input.",
    ]
    if sustained:
        notes.append(
            f"Sustained: {rate:,.0f} facts/s ({rate / floor:.3f} of the raw consume floor, {floor:,.0f}/s). "
            + (
                f"At {fell_behind.rate:,.0f}/s the job fell behind."
                if fell_behind
                else "It kept up at every step tried: the real ceiling is higher than the last step."
            )
        )
        if fell_behind:
            notes.append(
                rollup_cap_note(rows, analytics.rollup_max_offsets_per_trigger, analytics.rollup_trigger_s)
            )
    else:
        notes.append("The job did not keep up even at the lowest step.")
    if short:
        notes.append(
            "The producer fell short of its rate at "
            + ", ".join(f"{s.rate:,.0f}/s ({s.produced / s.seconds:,.0f}/s sent)" for s in short)
            + f" (at most {late:.1f} s late): the producer process shares the 2 cores with Spark."
        )
    notes.append(
        "The machine has 2 cores for the broker, the Spark driver and executors, its Python workers and the "
        "producer; other people's work ran too (load above)."
    )
    return {
        "title": "streaming job capacity (rollups + training) and micro-batch latency",
        "devices": devices,
        "step_s": steps[0].seconds,
        "rates_tried": [s.rate for s in run],
        "sustained_facts_per_s": rate,
        "fell_behind_at": fell_behind.rate if fell_behind else None,
        "floor_consume_per_s": round(floor),
        "ratio_to_floor": round(rate / floor, 4),
        "batch_latency_ms_at_sustained": latency,
        "journal_records": journal_total,
        "triggers_s": triggers,
        "rows": rows,
        "notes": " ".join(n for n in notes if n),
    }


def rollup_cap_note(rows: list[dict[str, Any]], cap: int | None, trigger_s: float) -> str:
    """Whether the rollup query fell behind because of its own intake limit (records per micro-batch and
    trigger interval) rather than because its micro-batches took too long."""
    behind = [r for r in rows if r["query"] == "hearth-rollups" and r["keeps up"] == "no"]
    if not cap or not behind:
        return ""
    row, ceiling = behind[0], cap / trigger_s
    if row["input rows/s"] < 0.9 * ceiling:
        return ""
    return (
        f"At {row['rate/s']:,}/s the rollup query took in {row['input rows/s']:,} rows/s: its own limit of "
        f"{cap:,} records per micro-batch, one micro-batch every {trigger_s:g} s ({ceiling:,.0f}/s), while "
        f"its micro-batches took {row['batch p50 ms'] / 1000:.1f} s (p50) and processed "
        f"{row['processed rows/s']:,} rows per second of batch time. The ceiling found is that setting "
        "(rollup_max_offsets_per_trigger / rollup_trigger_s), not the machine; the real one lies between "
        f"the sustained step and {row['rate/s']:,}/s and was not narrowed down further."
    )


@dataclass(frozen=True)
class StreamBench:
    """Highest telemetry rate the streaming job keeps up with, and its micro-batch latency (temp. broker)."""

    rates: tuple[float, ...] = option(DEFAULT_RATES, "Telemetry facts/s per step (repeat)", flag="--rate")
    step_s: float = option(120.0, "Seconds per step (two training triggers)", flag="--step")
    warmup_s: float = option(60.0, "Seconds at the first rate before the steps", flag="--warmup")
    devices: int = option(1000, "Devices the facts are spread over")
    rollup_trigger_s: float | None = option(
        None, "Rollup trigger, s (default: the job's)", flag="--rollup-trigger"
    )
    train_trigger_s: float | None = option(
        None, "Training trigger, s (default: the job's)", flag="--train-trigger"
    )


def main(params: StreamBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    with (
        tempfile.TemporaryDirectory(prefix="hearth-bench-stream-spark-") as tmp,
        bench_stack("stream", services=(), databases=False) as stack,
    ):
        result = run_streaming_bench(
            stack,
            Path(tmp),
            devices=params.devices,
            rates=sorted(params.rates),
            step_s=params.step_s,
            warmup_s=params.warmup_s,
            rollup_trigger_s=params.rollup_trigger_s,
            train_trigger_s=params.train_trigger_s,
        )
    path = write_result("stream", result)
    console.print(
        f"streaming job keeps up with {result['sustained_facts_per_s']:,.0f} facts/s, "
        f"{result['ratio_to_floor']:.2%} of the raw consume rate; written to {path}"
    )
    return result
