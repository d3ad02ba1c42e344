"""``hearth bench automations``: automations at fleet scale (``automation_fleet``: 10,000 automations over
10,000 thermostats by default), on a temporary broker, against the raw consume floor of the same run.

1. **Evaluation** (``evaluation``): the home journal holds the automations, the journal ``--facts``
   readings (one in ``--cross-every`` triggers its device's automations). The floor is a raw aiokafka
   read of that journal. Then the automations service's own composition root (``make_app``) runs in this
   process, and the bench times its read of the journal from the first record to the end: every fact
   decoded and evaluated against the home's automations, every triggered run acted on (its command on
   the inbox, its ``automation.ran`` fact on the home journal, sent per poll: the commands acked, then
   the run facts), the last poll's sends included. Facts evaluated per second, one process.
2. **Latency** (``automation_latency``): the device actor and the automations service as processes; the
   bench sends readings to the inbox at ``--rate`` for ``--duration`` s and measures trigger fact ->
   ``command.dispatched`` fact (both stamped by the actor).
3. **Backtest** over the evaluation journal: the query API's in-process reader (``read_stretch``, one
   home, every record of the stretch read and decoded) and the Spark job (every automation at once,
   ``--spark``); facts/s against the floor. The Spark job's runs are checked equal to what the live
   engine ran in step 1, and the in-process result equal to Spark's for that home.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from hearth_bench.figures.results import ratio_rows
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import BenchStack, bench_stack, counting_progress, raw_consume_rate
from hearth_bench.load.automation_fleet import automations, created_facts, journal_facts
from hearth_shared.adapters.kafka import ensure_topics, make_producer
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain.automation import Automation
from hearth_shared.domain.home_facts import encode_home_fact
from hearth_shared.schema.events import encode, utcnow

console = Console(stderr=True)


async def fill(settings: StackSettings, found: list[Automation], devices: int, facts: int, cross: int) -> int:
    """The home journal's automations and the journal's facts; returns how many facts."""
    producer = make_producer(settings.kafka_bootstrap_servers, "bench-fill", linger_ms=20)
    await producer.start()
    written = 0
    try:
        with counting_progress() as progress:
            task = progress.add_task("filling the journals", total=len(found) + devices + facts)
            for fact in created_facts(found):
                await producer.send(
                    settings.topics.home_journal, encode_home_fact(fact), key=fact.home_id.encode()
                )
            progress.advance(task, len(found))
            start = found[0].created_at + timedelta(seconds=1)
            for event in journal_facts(devices, facts, cross, start):
                await producer.send(settings.topics.journal, encode(event), key=event.device_id.encode())
                written += 1
                if written % 10_000 == 0:
                    progress.update(task, completed=len(found) + written)
            await producer.flush()
            progress.update(task, completed=len(found) + written)
    finally:
        await producer.stop()
    return written


async def evaluation_rate(settings: StackSettings, facts: int) -> tuple[float, int]:
    """Facts/s of the automations service's journal read (decode, evaluate, act), and the runs it made."""
    from hearth_automations.app import make_app
    from hearth_automations.settings import AutomationsSettings

    service = make_app(AutomationsSettings(stack=settings, default_automations=False, heartbeat_file=""))
    await service.writer.start()
    try:
        await service.homes_feed.start()
        await service.homes_feed.caught_up.wait()
        with console.status(f"the automations engine evaluates {facts:,} facts ..."):
            began = time.perf_counter()
            await service.journal_feed.start()
            await service.journal_feed.wait_caught_up()  # the last poll's sends acked
            took = time.perf_counter() - began
        runs = sum(sum(r.fired for r in runs.values()) for runs in service.engine.view.runs.values())
    finally:
        await service.journal_feed.stop()
        await service.homes_feed.stop()
        await service.writer.stop()
    return facts / took, runs


def backtest_rates(
    settings: StackSettings, work: Path, found: list[Automation], facts: int, *, spark: bool
) -> dict[str, Any]:
    """The query API's reader over one home's stretch, and the Spark job over every automation."""
    from hearth_read_models.query.backtest_views import read_stretch
    from hearth_shared.domain.automation_replay import backtest, replayed
    from hearth_shared.domain.home_view import DEFAULT_TIMEZONE

    start, end = found[0].created_at - timedelta(days=1), utcnow() + timedelta(days=1)
    first = found[0]
    with console.status("in-process backtest (the query API's reader) ..."):
        began = time.perf_counter()
        home_facts, complete = asyncio.run(
            read_stretch(settings.kafka_bootstrap_servers, settings.topics.journal, first.home_id, start, end)
        )
        in_process = backtest(first, map(replayed, home_facts), start, end, DEFAULT_TIMEZONE)
        took = time.perf_counter() - began
    figures: dict[str, Any] = {"in_process_per_s": facts / took, "in_process_complete": complete}
    if not spark:
        return figures
    from hearth_analytics.jobs.automation_backtest import spark_backtest
    from hearth_analytics.settings import AnalyticsSettings
    from hearth_analytics.spark import build_session

    analytics = AnalyticsSettings(stack=settings, archive_url=str(work / "no-archive"))
    with console.status("starting Spark ..."):
        session = build_session(analytics, "hearth-bench-automations")
        session.range(1).count()
    try:
        timings = []
        for attempt in ("first", "warm"):
            with console.status(f"Spark backtest of {len(found):,} automations ({attempt} run) ..."):
                began = time.perf_counter()
                results = spark_backtest(session, analytics, found, start, end)
                timings.append(time.perf_counter() - began)
    finally:
        session.stop()
    if results[first.automation_id] != in_process:
        raise RuntimeError(f"Spark and the in-process backtest differ for {first.automation_id}")
    figures |= {
        "spark_cold_per_s": facts / timings[0],
        "spark_per_s": facts / timings[1],
        "spark_fired": sum(r.fired for r in results.values()),
    }
    return figures


def _journals(stack: BenchStack, suffix: str) -> StackSettings:
    """A topic set of its own on the bench's broker."""
    settings = stack.settings.model_copy(update={"topic_prefix": stack.settings.topic_prefix + suffix})
    asyncio.run(ensure_topics(settings.kafka_bootstrap_servers, settings.topics.specs()))
    return settings


def run_automations_bench(stack: BenchStack, work: Path, args: dict[str, Any]) -> dict[str, Any]:
    from hearth_bench.load.automation_latency import measure_latency

    found = automations(args["automations"], args["devices"], utcnow() - timedelta(hours=2))
    calm = _journals(stack, "c")  # no reading triggers anything: the evaluation alone
    asyncio.run(fill(calm, found, args["devices"], args["facts"], args["facts"] + 1))
    settings = _journals(stack, "e")
    facts = asyncio.run(fill(settings, found, args["devices"], args["facts"], args["cross_every"]))
    batch = min(20_000, max(500, facts // 50))  # several polls even for a small journal
    floor = asyncio.run(raw_consume_rate(settings, settings.topics.journal, facts, max_records=batch))
    console.print(f"floor: raw aiokafka consume of the journal {floor:,.0f} records/s")
    calm_rate, _ = asyncio.run(evaluation_rate(calm, facts))
    rate, runs = asyncio.run(evaluation_rate(settings, facts))
    console.print(f"evaluation: {calm_rate:,.0f} facts/s with no trigger, {rate:,.0f} with {runs:,} runs")
    backtests = backtest_rates(settings, work, found, facts, spark=args["spark"])
    if args["spark"] and backtests["spark_fired"] != runs:
        counted = backtests["spark_fired"]
        raise RuntimeError(f"the Spark backtest counted {counted:,} runs, the engine {runs:,}")
    live = measure_latency(stack, args)
    paths = [
        ("automations engine, one process: facts evaluated, none triggers", calm_rate),
        (f"automations engine, one process: facts evaluated, 1 in {args['cross_every']} triggers", rate),
        ("backtest, in-process (query API reader, one home)", backtests["in_process_per_s"]),
    ]
    if args["spark"]:
        paths.append(("backtest, Spark job, every automation (local[2], warm)", backtests["spark_per_s"]))
        paths.append(("backtest, Spark job, first run (Python workers start)", backtests["spark_cold_per_s"]))
    spark_figures = {k: round(v) for k, v in backtests.items() if k.startswith("spark_") and k.endswith("_s")}
    return {
        "title": "evaluation rate, trigger -> command dispatched, backtests over the journal",
        **{k: args[k] for k in ("automations", "devices", "facts", "cross_every", "rate", "duration")},
        "floor_consume_per_s": round(floor),
        "evaluated_no_trigger_per_s": round(calm_rate),
        "evaluated_per_s": round(rate),
        "evaluated_ratio_to_floor": round(rate / floor, 3),
        "runs": runs,
        "backtest_in_process_per_s": round(backtests["in_process_per_s"]),
        **{f"backtest_{k}": v for k, v in spark_figures.items()},
        **live,
        "rows": ratio_rows("facts/s", ("raw aiokafka consume of the journal (floor)", floor), *paths),
        "notes": (
            f"{args['automations']:,} automations over {args['devices']:,} thermostats (homes of 10), "
            f"{facts:,} journal facts, one reading in {args['cross_every']} triggers (and a journal where "
            "none does). Evaluation: the automations service's make_app in the bench process, its journal "
            "read timed to the end (decode, evaluate, act: per poll of records, the runs' commands sent to "
            "the inbox and acked, then their run facts). Backtests over the same journal; Spark's session "
            f"start not counted, its runs checked equal to the engine's ({runs:,}). Latency: readings sent "
            f"at {args['rate']:,}/s for {args['duration']:g} s through the device actor; trigger fact -> "
            f"command.dispatched fact (both stamped by the actor): {_latency_text(live)}. A 2-core machine "
            "shared with other work."
        ),
    }


def _latency_text(live: dict[str, Any]) -> str:
    figures = live["trigger_to_dispatched_ms"]
    if not figures["count"]:
        return "no trigger was measured"
    text = f"{figures['count']:,} triggers, p50 {figures['p50']:,} ms, p99 {figures['p99']:,} ms"
    return text + (f", {live['commands_missing']:,} never dispatched" if live["commands_missing"] else "")


@dataclass(frozen=True)
class AutomationsBench:
    """Automations: facts evaluated/s per process and backtest rates against the raw consume floor, and
    trigger fact -> command dispatched latency (temporary broker, device actor, automations service)."""

    automations: int = option(10_000, "Automations (one per device, then round robin)")
    devices: int = option(10_000, "Thermostats, in homes of 10")
    facts: int = option(200_000, "Journal readings the engine and the backtests read")
    cross_every: int = option(10, "One reading in this many triggers")
    rate: int = option(20_000, "Readings/s sent through the actor for the latency")
    duration: float = option(30.0, "Seconds of readings for the latency")
    spark: bool = option(True, "Also time the Spark backtest")


def main(params: AutomationsBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result
    from hearth_bench.load.automation_latency import check_rounds

    args = dataclasses.asdict(params)
    check_rounds(args)
    env = {"HEARTH_AUTOMATIONS_DEFAULT_AUTOMATIONS": "false"}
    with (
        tempfile.TemporaryDirectory(prefix="hearth-bench-automations-") as tmp,
        bench_stack("automations", services=("device-actor",), databases=False, env=env) as stack,
    ):
        result = run_automations_bench(stack, Path(tmp), args)
    path = write_result("automations", result)
    console.print(
        f"automations: {result['evaluated_per_s']:,} facts/s evaluated "
        f"({result['evaluated_ratio_to_floor']:.1%} of the raw consume rate); trigger -> dispatched "
        f"p99 {result['trigger_to_dispatched_ms'].get('p99', 'n/a')} ms; {path}"
    )
    return result
