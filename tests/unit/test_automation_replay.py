"""The backtest's replay, pure: a home's automations replayed together count what each replayed alone
counts, runs are counted per hour; and what ``hearth automation backtest`` makes of a result (its
moments, its chart's buckets)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import typer
from rich.console import Console

from hearth.groups.automation_cli import MAX_ROWS, buckets, chart, parse_moment
from hearth_shared.domain.automation import Action, Automation, NotifyAction, StateTest, Trigger
from hearth_shared.domain.automation_replay import HomeReplay, Replayed, backtest, record_ms

pytestmark = pytest.mark.unit

T0 = datetime(2026, 7, 1, tzinfo=UTC)
STRETCH = (T0, T0 + timedelta(days=1))


def _automation(trigger: Trigger, *conditions: StateTest) -> Automation:
    return Automation(
        automation_id=uuid.uuid4(), home_id="h", name="a", trigger=trigger, conditions=conditions,
        actions=(Action(notify=NotifyAction(message="x")),), created_at=T0,
    )  # fmt: skip


def _facts() -> list[Replayed]:
    facts: list[Replayed] = []
    for i in range(30):  # every 10 minutes for 5 hours: t1 swings 20 -> 30 -> 20 ..., l1 opens and closes
        at = T0 + timedelta(minutes=10 * i)
        facts.append((("device.state_reported",), "t1", at, {"ambient_c": 20 + 10 * (i % 2)}))
        facts.append((("device.state_reported",), "l1", at, {"door": "open" if i % 3 else "closed"}))
        if i % 4 == 0:
            facts.append((("anomaly.detected",), "t1", at, None))
    return facts


def test_a_homes_automations_replayed_together_count_what_each_counts_alone() -> None:
    automations = [
        _automation(Trigger(state=StateTest(device_id="t1", key="ambient_c", above=25))),
        _automation(
            Trigger(state=StateTest(device_id="t1", key="ambient_c", above=25)),
            StateTest(device_id="l1", key="door", equals="closed"),
        ),
        _automation(Trigger(fact="anomaly.detected")),
    ]
    together = HomeReplay(automations, *STRETCH, "UTC")
    for fact in _facts():
        together.feed(fact)
    together.finish()
    for automation in automations:
        assert together.results[automation.automation_id] == backtest(automation, _facts(), *STRETCH, "UTC")
    hot = together.results[automations[0].automation_id]
    assert (hot.facts, hot.triggered, hot.fired) == (len(_facts()), 15, 15)  # every other report: an edge
    assert sum(hot.fired_by_hour.values()) == hot.fired and len(hot.fired_by_hour) == 5
    assert hot.fired_by_hour[T0] == 3  # 00:10, 00:30, 00:50
    assert together.results[automations[1].automation_id].fired < hot.fired  # the door was mostly open


def test_the_first_100_run_times_are_kept_and_every_run_counted() -> None:
    automation = _automation(Trigger(fact="anomaly.detected"))
    anomaly = ("anomaly.detected",)
    facts: list[Replayed] = [(anomaly, "t1", T0 + timedelta(minutes=i), None) for i in range(150)]
    result = backtest(automation, facts, *STRETCH, "UTC")
    assert result.fired == 150 and len(result.fired_at) == 100 and result.fired_at[-1] == facts[99][2]
    assert result.fired_by_hour == {T0: 60, T0 + timedelta(hours=1): 60, T0 + timedelta(hours=2): 30}


def test_a_stretch_bound_is_a_kafka_timestamp_in_milliseconds() -> None:
    assert record_ms(T0 + timedelta(microseconds=1999)) == record_ms(T0) + 1
    assert record_ms(datetime(1960, 1, 1, tzinfo=UTC)) == 0


def test_the_cli_reads_dates_times_and_durations() -> None:
    now = datetime(2026, 11, 24, 12, tzinfo=UTC)
    assert parse_moment("now", now=now) == now
    assert parse_moment("2026-11-20", now=now) == datetime(2026, 11, 20, tzinfo=UTC)
    assert parse_moment("2026-11-20T10:00+01:00", now=now) == datetime(2026, 11, 20, 9, tzinfo=UTC)
    assert parse_moment("7d", now=now, other=now - timedelta(days=1)) == now - timedelta(days=8)
    for bad in ("yesterday", "never", "7w"):
        with pytest.raises(typer.BadParameter):
            parse_moment(bad, now=now)


def _by_hour(counts: dict[datetime, int]) -> dict[str, Any]:
    return {hour.isoformat(): n for hour, n in counts.items()}


def test_the_chart_counts_runs_per_hour_day_or_week_over_the_whole_stretch() -> None:
    runs = _by_hour({T0: 2, T0 + timedelta(hours=5): 1, T0 + timedelta(days=2, hours=1): 4})
    unit, rows = buckets(runs, T0, T0 + timedelta(days=2, hours=2))
    assert unit == "hour" and len(rows) == 50 and rows[0] == ("2026-07-01 00:00", 2)
    assert sum(n for _, n in rows) == 7 and rows[-1] == ("2026-07-03 01:00", 4)
    unit, rows = buckets(runs, T0 - timedelta(days=3), T0 + timedelta(days=10))
    assert unit == "day" and len(rows) == 13 and rows[3] == ("2026-07-01", 3) and rows[5] == ("2026-07-03", 4)
    unit, rows = buckets(runs, T0 - timedelta(days=200), T0 + timedelta(days=10))
    assert unit == "week" and ("2026-06-29", 7) in rows  # the week from Monday 29 June
    unit, rows = buckets(runs, T0 - timedelta(days=3000), T0 + timedelta(days=10))
    assert len(rows) <= MAX_ROWS and rows == [("2026-06-29", 7)]  # too many weeks: only those with runs
    console = Console(width=100, record=True)
    console.print(chart("day", [("2026-07-01", 4), ("2026-07-02", 1), ("2026-07-03", 0)]))
    lines = console.export_text().splitlines()
    assert lines[-3].count("█") == 40 and lines[-2].count("█") == 10 and "█" not in lines[-1]
