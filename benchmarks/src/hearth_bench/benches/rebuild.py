"""Rebuild throughput: journal events per second replayed into fresh read models, against the floor.

Temporary servers come from ``bench_stack``. The journal is filled first with realistic facts
(``hearth_devstack.workload.journal_facts``: devices registered, then mostly telemetry, now and then a
command run to convergence, an anomaly, a connectivity blip). The floor is a raw read of that same journal
(``raw_consume_rate``) with the projector's consumer settings, in the same run. Then
``hearth_read_models.rebuild.run.rebuild`` replays it into a fresh schema, checks it and swaps it in, as
`hearth rebuild` does; throughput is events / replay time (first fetch to last commit and the history
index build; checks and swap excluded). The result also tells each part's CPU while the rebuild ran (the
rebuild's processes, PostgreSQL, Kafka, everything else).
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from hearth_bench.figures.results import ratio_rows
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import BenchStack, bench_stack, raw_consume_rate
from hearth_devstack.workload.journal_facts import JournalFacts, fill_journal
from hearth_read_models.projection.app import make_consumer
from hearth_read_models.rebuild.run import REPLAY_PROCESSES, RebuildResult, ReplayProgress, rebuild
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.adapters.kafka import ensure_topics
from hearth_shared.adapters.settings import StackSettings

console = Console(stderr=True)


async def _floor(stack: StackSettings, events: int, batch_size: int) -> float:
    """The raw consume rate of the journal with the rebuild's own consumer settings (made in the loop:
    aiokafka wants a running one)."""
    consumer = make_consumer(stack)
    return await raw_consume_rate(
        stack, stack.topics.journal, events, max_records=batch_size, consumer=consumer
    )


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )


def rebuild_with_progress(
    settings: ReadModelSettings, what: str, events: int, **options: Any
) -> RebuildResult:
    """``rebuild(settings, **options)`` with a progress bar of the records replayed (of ``events``)."""
    with _progress() as progress:
        task = progress.add_task(what, total=events, rate="")

        def show(p: ReplayProgress) -> None:
            rate = p.events / p.elapsed_s if p.elapsed_s else 0
            progress.update(
                task, description=f"{what}: {p.phase}", completed=p.events,
                rate=f"{rate:,.0f} events/s, lag {p.lag:,}",
            )  # fmt: skip

        return asyncio.run(rebuild(settings, on_progress=show, **options))


def cpu_seconds(bench: BenchStack) -> dict[str, float]:
    """CPU seconds used so far by the rebuild (this process and its children that ended: the replay's
    share process), by PostgreSQL and Kafka (every process under each, those that ended too: a
    connection's backend ends with it), and by the whole machine."""

    def used(process: psutil.Process) -> float:
        with contextlib.suppress(psutil.Error):
            return float(sum(process.cpu_times()[:4]))  # user, system, and of the children it waited for
        return 0.0

    seconds = {"rebuild": used(psutil.Process())}
    for name in ("postgres", "kafka"):
        top = psutil.Process(bench.pid(name))
        seconds[name] = sum(used(p) for p in [top, *top.children(recursive=True)])
    machine = psutil.cpu_times()
    seconds["machine"] = machine.user + machine.nice + machine.system + machine.irq + machine.softirq
    return seconds


def run_rebuild_bench(
    settings: ReadModelSettings,
    *,
    devices: int,
    events: int,
    batch_size: int,
    cpu: Callable[[], dict[str, float]] | None = None,
) -> dict[str, Any]:
    """Fill, measure the floor, rebuild; ``cpu`` (``cpu_seconds``) tells each part's CPU use."""
    stack = settings.stack
    asyncio.run(ensure_topics(stack.kafka_bootstrap_servers, stack.topics.specs()))
    with _progress() as progress:
        task = progress.add_task("filling the journal", total=events, rate="")
        began = time.perf_counter()
        facts = iter(JournalFacts(devices))
        asyncio.run(fill_journal(stack, facts, events, lambda n: progress.update(task, completed=n)))
        fill_s = time.perf_counter() - began
    console.print(f"filled {events:,} facts in {fill_s:.0f} s ({events / fill_s:,.0f}/s)")
    floor = asyncio.run(_floor(stack, events, batch_size))
    console.print(f"floor: raw consume of the journal {floor:,.0f} records/s")
    before, began = cpu() if cpu else {}, time.perf_counter()
    result = rebuild_with_progress(settings, "rebuild", events, batch_size=batch_size)
    after, rebuild_s = cpu() if cpu else {}, time.perf_counter() - began
    # each part's CPU while the rebuild ran (replay, checks, swap), in % of one core; ``others``: the rest
    # of the machine (other people's work)
    share = {name: round((after[name] - before[name]) / rebuild_s * 100) for name in after}
    if share:
        share["others"] = max(0, share.pop("machine") - sum(share.values()))
    rate = result.events_per_s
    met = [rate >= 50_000, rate >= floor / 2]
    verdict = (
        "both met"
        if all(met)
        else "not met ("
        + " and ".join(
            text
            for text, ok in zip((f"{rate:,.0f}/s < 50,000/s", f"{rate / floor:.2f} < 0.5"), met, strict=True)
            if not ok
        )
        + ")"
    )
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "title": "the journal replayed into fresh read models",
        "devices": devices,
        "events": events,
        "batch_size": batch_size,
        "fill_s": round(fill_s, 1),
        "floor_consume_per_s": round(floor),
        "rebuild_events_per_s": round(rate),
        "ratio_to_floor": round(rate / floor, 3),
        "replay_s": round(result.replay_s, 1),
        "swap_s": round(result.swap_s, 2),
        "index_s": round(result.index_s, 1),
        "peak_rss_mb": round(peak_rss_mb),
        "replay_processes": REPLAY_PROCESSES,
        "cpu_pct_of_one_core": share,
        "rows": ratio_rows(
            "events/s",
            ("raw consume of the journal (floor)", floor),
            ("rebuild: replay into a fresh schema", rate),
        ),
        "notes": (
            f"{events:,} journal facts of {devices:,} devices (telemetry, with commands run to convergence, "
            f"anomalies and connectivity changes among them), batches of {batch_size:,}. The rebuild shares "
            f"the journal's partitions out over {REPLAY_PROCESSES} processes (each with its own consumer, "
            "same settings as the floor's, and its own PostgreSQL connection); each decodes every fact, "
            "folds it into its twin and COPYs history (binary format, the fact's JSON as it came) and "
            "alerts, commands through a staging table, one transaction per batch with its offsets, writing "
            "a batch while it folds the next; twins are written once at the end. The floor is one consumer "
            f"in one process. Replay time ({result.replay_s:.0f} s) runs from the first fetch to the last "
            f"commit and the history index build ({result.index_s:.0f} s of it, PostgreSQL alone); the "
            "checks (row count and checksum per table) and the swap "
            f"({result.swap_s:.1f} s) come after. CPU while the rebuild ran, in % of one core: "
            + ", ".join(f"{name} {pct}" for name, pct in share.items())
            + f". Peak RSS of the bench process {peak_rss_mb:,.0f} MB. Targets: 50,000 events/s and half "
            f"the floor: {verdict}."
        ),
    }


@dataclass(frozen=True)
class RebuildBench:
    """Rebuild throughput against the raw consume rate of the same journal (temporary servers)."""

    events: int = option(5_000_000, "Journal facts to fill and replay")
    devices: int = option(10_000, "Devices the facts are spread over")
    batch_size: int = option(50_000, "Records per replay transaction")


def main(params: RebuildBench) -> dict[str, Any]:
    """Run against temporary servers (``bench_stack``) and write the result."""
    from hearth_bench.figures.results import write_result

    with bench_stack("rebuild", services=()) as bench:
        settings = ReadModelSettings(stack=bench.settings, schema_name=bench.settings.topic_prefix)
        result = run_rebuild_bench(
            settings,
            devices=params.devices,
            events=params.events,
            batch_size=params.batch_size,
            cpu=lambda: cpu_seconds(bench),
        )
    path = write_result("rebuild", result)
    console.print(
        f"rebuild: {result['rebuild_events_per_s']:,} events/s, {result['ratio_to_floor']:.1%} of the raw "
        f"consume rate; written to {path}"
    )
    return result
