"""``hearth bench learn``: suggested programs and preheat evaluated like the papers do, on weeks the learner
did not see, and the learn job's time against a Spark scan of the same facts (issue 22, point 6).

1. **History**: ``weeks`` (6) of simulated households for ``homes`` homes (1,000) of one thermostat each,
   ending now, appended straight to a temporary broker's journal as the device path would have written
   them (``hearth_bench.load.learn_history``: the simulator's messages through the gateway's edge and the
   actor's pure decide/stamp/evolve; why not through MQTT is said there).
2. **Training**: ``hearth analytics learn`` (``hearth_analytics.jobs.learn.learn``) over the reports whose
   device time falls in the first ``train_weeks`` (4): the job's own reading, learning and publishing of
   ``schedule.suggested`` and ``room.response_fitted`` to the home journal, timed.
3. **Floor**: the same Spark session reads the same history (``read_history``, archive plus journal;
   here the journal) and counts its records, timed before and after the learn job; the faster of the two
   is the floor (the second read finds the broker's files in the page cache, as the job did).
4. **Evaluation** on the held-out weeks, in plain Python (``hearth_bench.figures.learn_figures``, where
   each rule is written down): the share of the household's manual changes the suggested program makes
   unnecessary (goal >= 60 %), MissTime with preheat against the programmed times (goal: cut by >= 80 %),
   heating hours with the suggested program and preheat against the household's own program (goal: at
   most +5 %).

The rooms are replayed on ``workers`` processes, as the history is written. Nothing here is a timed
test; the integration test runs it at a tiny size (tests/integration/test_learn_bench.py).
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hearth_bench.benches.batch_replay import timed_spark_job
from hearth_bench.figures.learn_figures import (
    GOAL_HEATING_RATIO,
    GOAL_MISS_CUT,
    GOAL_UNNECESSARY,
    DeviceLearned,
    Figures,
    Span,
    evaluate_homes,
    summarize,
)
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import bench_stack
from hearth_bench.load.learn_history import HistoryWritten, homes_of, in_processes, write_history
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain.room_response import CAP_S

if TYPE_CHECKING:
    from hearth_analytics.jobs.learn import Learned

console = Console(stderr=True)
WEEK_S = 7 * 86_400.0
HOME_PREFIX = "learn"


@dataclass(frozen=True)
class LearnBench:
    """Suggested programs and preheat on held-out weeks of simulated households; the learn job against a
    Spark scan of the same facts (temporary broker)."""

    homes: int = option(1_000, "Homes, one thermostat each")
    weeks: int = option(6, "Weeks of simulated history, ending now")
    train_weeks: int = option(4, "The first weeks the learn job reads; the others are held out")
    seed: int = option(0, "Seed of the households, climates and rooms")
    workers: int = option(2, "Processes writing the history and replaying the rooms")
    preheat_max_min: int = option(
        CAP_S // 60, "The households' preheat cap (a schedule's preheat_max_min; default the deployment's)"
    )


def learned_by_device(learned: Learned) -> dict[str, DeviceLearned]:
    """The learn job's facts per thermostat."""
    programs = {s.device_id: s.payload for s in learned.suggestions if s.device_id is not None}
    responses = {r.device_id: r.payload for r in learned.responses if r.device_id is not None}
    return {
        device_id: DeviceLearned(
            program=programs[device_id].program if device_id in programs else (),
            time_zone=programs[device_id].evidence.timezone if device_id in programs else "UTC",
            response=responses.get(device_id),
        )
        for device_id in programs.keys() | responses.keys()
    }


def run_learn_bench(settings: StackSettings, spark: Any, work: Path, params: LearnBench) -> dict[str, Any]:
    """Write, learn, scan, evaluate (module docstring) on the broker of ``settings`` (its topics made)
    with the given SparkSession; the result, not yet written anywhere."""
    from hearth_analytics.jobs.learn import learn
    from hearth_analytics.settings import AnalyticsSettings
    from hearth_analytics.sources.history import read_history

    if not 0 < params.train_weeks < params.weeks:
        raise ValueError(
            f"train on 1 to {params.weeks - 1} of the {params.weeks} weeks, not {params.train_weeks}"
        )
    end = time.time()
    whole = Span(end - params.weeks * WEEK_S, end)
    held_out = Span(whole.start + params.train_weeks * WEEK_S, end)
    homes = homes_of(HOME_PREFIX, params.homes)
    console.print(f"writing {params.weeks} weeks of {params.homes:,} homes on {params.workers} processes ...")
    written = write_history(settings, homes, whole, seed=params.seed, workers=params.workers)
    console.print(
        f"history: {written.facts:,} facts ({written.reports:,} reports, {written.manual_changes:,} manual "
        f"changes) in {written.seconds:.0f} s"
    )

    analytics = AnalyticsSettings(
        stack=settings, archive_url=str(work / "no-archive"), checkpoint_dir=work / "checkpoints"
    )
    spark.range(1).count()  # the session up before anything is timed

    def scan() -> tuple[int, float]:
        return timed_spark_job(
            spark, "Spark: scan the history (floor)", lambda: read_history(spark, analytics).count()
        )

    (scanned, scan_before_s) = scan()
    learned, learn_s = timed_spark_job(
        spark,
        f"Spark: hearth analytics learn (the first {params.train_weeks} weeks)",
        lambda: learn(spark, analytics, until=datetime.fromtimestamp(held_out.start, UTC)),
    )
    (_, scan_after_s) = scan()
    scan_s = min(scan_before_s, scan_after_s)
    if scanned != written.facts:
        raise RuntimeError(f"{written.facts:,} facts written, Spark read {scanned:,}")
    console.print(f"learn job: {learn_s:.1f} s; the scan of the same facts: {scan_s:.1f} s")

    began = time.perf_counter()
    by_device = learned_by_device(learned)
    rooms = [
        room
        for share in in_processes(
            evaluate_homes,
            homes,
            params.workers,
            held_out,
            params.seed,
            by_device,
            params.preheat_max_min * 60,
        )
        for room in share
    ]
    evaluate_s = time.perf_counter() - began
    figures = summarize(rooms)
    console.print(f"evaluated {figures.rooms:,} rooms in {evaluate_s:.0f} s")
    return _result(params, written, figures, scan_s=scan_s, learn_s=learn_s, evaluate_s=evaluate_s)


def _met(ok: bool) -> str:
    return "yes" if ok else "no"


def _result(
    params: LearnBench,
    written: HistoryWritten,
    figures: Figures,
    *,
    scan_s: float,
    learn_s: float,
    evaluate_s: float,
) -> dict[str, Any]:
    f = figures
    share, cut, ratio = f.unnecessary_share, f.miss_cut, f.heating_ratio
    met = {
        "unnecessary": share >= GOAL_UNNECESSARY,  # NaN (nothing to judge) is not met
        "miss_cut": cut >= GOAL_MISS_CUT,
        "heating": ratio <= GOAL_HEATING_RATIO,
    }
    said = {
        "unnecessary": f"{share:.1%} of the manual changes made unnecessary (goal 60 %)",
        "miss_cut": f"MissTime cut by {cut:.1%} (goal 80 %)",
        "heating": f"heating hours {ratio:.3f}x the household's own program (goal at most 1.05x)",
    }
    short = [said[name] for name, ok in met.items() if not ok]
    homes = max(params.homes, 1)
    return {
        "title": "suggested programs and preheat on held-out weeks; the learn job against a scan",
        **{
            name: getattr(params, name)
            for name in ("homes", "weeks", "train_weeks", "seed", "workers", "preheat_max_min")
        },
        "facts": written.facts,
        "reports": written.reports,
        "manual_changes": written.manual_changes,
        "write_s": round(written.seconds, 1),
        "write_facts_per_s": round(written.facts / written.seconds),
        "scan_s": round(scan_s, 2),
        "scan_facts_per_s": round(written.facts / scan_s),
        "learn_s": round(learn_s, 2),
        "learn_facts_per_s": round(written.facts / learn_s),
        "learn_to_scan": round(learn_s / scan_s, 2),
        "evaluate_s": round(evaluate_s, 1),
        "seconds_per_home": {
            "write": round(written.seconds / homes, 3),
            "learn": round(learn_s / homes, 3),
            "evaluate": round(evaluate_s / homes, 3),
        },
        "suggestions": f.suggested,
        "responses_with_heating": f.fitted,
        "held_out_changes": f.changes,
        "unnecessary_share": _rounded(share),
        "unnecessary_share_own_program": _rounded(f.unnecessary_share_own),
        "miss_own_min": round(f.miss_own_min),
        "miss_programmed_min": round(f.miss_programmed_min),
        "miss_preheated_min": round(f.miss_preheated_min),
        "miss_cut": _rounded(cut),
        "unreached_preheated_min": round(f.unreached_preheated_min),
        "comfort_periods": f.comfort_periods,
        "preheats": f.preheats,
        "preheats_capped": f.preheats_capped,
        "preheats_unreachable": f.preheats_unreachable,
        "heating_own_h": round(f.heating_own_h, 1),
        "heating_programmed_h": round(f.heating_programmed_h, 1),
        "heating_preheated_h": round(f.heating_preheated_h, 1),
        "heating_ratio": _rounded(ratio),
        "goals_met": met,
        "rows": _rows(f, met, learn_s=learn_s, scan_s=scan_s),
        "notes": _notes(
            params, written, f, learn_s=learn_s, scan_s=scan_s, evaluate_s=evaluate_s, short=short
        ),
    }


def _rows(f: Figures, met: dict[str, bool], *, learn_s: float, scan_s: float) -> list[dict[str, str]]:
    """The section's table: each figure, its goal, and whether it is met."""
    share, cut, ratio = f.unnecessary_share, f.miss_cut, f.heating_ratio
    return [
        {
            "figure": "manual changes made unnecessary by the suggested program",
            "value": f"{share:.1%} of {f.changes:,}",
            "goal": ">= 60 %",
            "met": _met(met["unnecessary"]),
        },
        {
            "figure": "the same by the household's own program (the ceiling)",
            "value": f"{f.unnecessary_share_own:.1%}",
            "goal": "",
            "met": "",
        },
        {
            "figure": "MissTime: programmed time -> preheat",
            "value": f"{f.miss_programmed_min:,.0f} -> {f.miss_preheated_min:,.0f} min (cut {cut:.1%})",
            "goal": "cut >= 80 %",
            "met": _met(met["miss_cut"]),
        },
        {
            "figure": "heating hours: suggested program + preheat / own program",
            "value": f"{f.heating_preheated_h:,.0f} / {f.heating_own_h:,.0f} h = {ratio:.3f}",
            "goal": "<= 1.05",
            "met": _met(met["heating"]),
        },
        {
            "figure": "Spark: learn job / scan of the same facts (floor)",
            "value": f"{learn_s:.1f} s / {scan_s:.1f} s = {learn_s / scan_s:.1f}x",
            "goal": "",
            "met": "",
        },
    ]


def _hours(minutes: int) -> str:
    return f"{minutes / 60:g} h"


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)


def _notes(
    params: LearnBench,
    written: HistoryWritten,
    f: Figures,
    *,
    learn_s: float,
    scan_s: float,
    evaluate_s: float,
    short: list[str],
) -> str:
    held_out = params.weeks - params.train_weeks
    return (
        f"{params.homes:,} simulated homes of one thermostat, {params.weeks} weeks ending at the run (seed "
        f"{params.seed}): {written.facts:,} journal facts ({written.reports:,} reports, "
        f"{written.manual_changes:,} manual changes), appended straight to the journal through the gateway's "
        f"edge and the device actor's decide/stamp/evolve in {written.seconds:.0f} s on {params.workers} "
        "processes (not through MQTT: the history writer's cap of 3,000 reports/s would take 33 minutes "
        "for 1,000 homes). `hearth analytics learn` read the reports of the first "
        f"{params.train_weeks} weeks ({learn_s:.0f} s, publishing included): {f.suggested:,} suggestions, "
        f"{f.fitted:,} heating responses. The floor is the same SparkSession counting the same history, "
        f"the faster of a read before and after the job ({scan_s:.1f} s). The {held_out} held-out weeks "
        f"were replayed in plain Python ({evaluate_s:.0f} s; hearth_bench/figures/learn_figures.py): a "
        "manual change is unnecessary when the program's target in force within 30 minutes of it is within "
        "0.5 °C of its target; each room's physics (the simulator's thermal model, the home's outdoor "
        "series) is stepped a minute at a time under the household's own program (its routine as the "
        "simulator drew it), the suggested program at its programmed times, and the suggested program "
        "with preheat (the scheduler's rule, the lead from the fitted response), the changes a program "
        "leaves holding until its next transition; MissTime is the time from a raising transition's "
        "programmed instant until the room is within 0.5 °C of the target "
        f"({f.comfort_periods:,} comfort periods, {f.preheats:,} preheated; at the longest lead allowed, "
        f"{_hours(params.preheat_max_min)} (the households' cap): {f.preheats_capped:,} as the room needed "
        f"more, {f.preheats_unreachable:,} as the fit said it "
        "levels off at or below the target at that outdoor temperature; of the MissTime left with preheat, "
        f"{f.unreached_preheated_min:,.0f} min are in periods the room never came within the band, a "
        "heater too weak for that target on that day). Goals: "
        + ("all met." if not short else "short of them: " + "; ".join(short) + ".")
    )


def main(params: LearnBench) -> dict[str, Any]:
    from hearth_analytics.settings import AnalyticsSettings
    from hearth_analytics.spark import build_session
    from hearth_bench.figures.results import write_result

    with (
        tempfile.TemporaryDirectory(prefix="hearth-bench-learn-") as tmp,
        bench_stack("learn", services=(), databases=False) as stack,
    ):
        began = time.perf_counter()
        spark = build_session(AnalyticsSettings(stack=stack.settings), "hearth-bench-learn")
        spark.range(1).count()
        session_s = time.perf_counter() - began
        try:
            result = run_learn_bench(stack.settings, spark, Path(tmp), params)
        finally:
            spark.stop()
    result["spark_session_s"] = round(session_s, 1)
    path = write_result("learn", result)
    console.print(
        f"learn: {result['unnecessary_share']} of the held-out changes unnecessary, MissTime cut "
        f"{result['miss_cut']}, heating x{result['heating_ratio']}, learn {result['learn_to_scan']}x the "
        f"scan; {path}"
    )
    return result
