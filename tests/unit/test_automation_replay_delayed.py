"""The backtest's replay of delayed triggers, pure, against a fake history: a ``for_s`` state trigger
counted at its due time (one that holds, one broken before due, one due after the stretch's end, one
broken after it was due), a daily time trigger over a stretch crossing a DST change (once a day, at the
zone's wall-clock time), conditions on the state replayed up to the due time; and the same counts as the
live engine (``hearth_automations.service.engine`` with a fake clock ticking every second or minute) makes
of the same history, for random histories."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from hearth_automations.service.engine import Engine
from hearth_shared.domain.automation import Action, Automation, NotifyAction, StateTest, TimeOfDay, Trigger
from hearth_shared.domain.automation_replay import BacktestResult, HomeReplay, Replayed, backtest
from hearth_shared.domain.home_facts import AutomationCreated, AutomationRan, HomeTimezoneSet, TimezonePayload
from hearth_shared.domain.home_view import HomesView
from hearth_shared.schema.events import StateReported, StateReportedPayload
from tests.support.fakes import FakeClock, FakeEnginePath, FakeNotify

pytestmark = pytest.mark.unit

T0 = datetime(2026, 7, 1, 12, tzinfo=UTC)
REPORTED = ("device.state_reported",)  # a state report's names (``fact_names``)
HOT_FOR_2_MIN = Trigger(state=StateTest(device_id="t1", key="ambient_c", above=25, for_s=120))
DOOR_CLOSED = StateTest(device_id="l1", key="door", equals="closed")


def _automation(trigger: Trigger, *conditions: StateTest, created_at: datetime = T0) -> Automation:
    return Automation(
        automation_id=uuid.uuid4(), home_id="h", name="a", trigger=trigger, conditions=conditions,
        actions=(Action(notify=NotifyAction(message="x")),), mode="parallel", created_at=created_at,
    )  # fmt: skip


def _hot(minutes: float, value: float) -> Replayed:
    return (REPORTED, "t1", T0 + timedelta(minutes=minutes), {"ambient_c": value})


def _door(minutes: float, value: str) -> Replayed:
    return (REPORTED, "l1", T0 + timedelta(minutes=minutes), {"door": value})


def _run(
    automation: Automation, facts: list[Replayed], hours: float = 1, zone: str = "UTC"
) -> BacktestResult:
    return backtest(automation, facts, T0, T0 + timedelta(hours=hours), zone)


# ------------------------------------------------------------------------------------- held for for_s


def test_a_state_held_for_for_s_fires_at_its_due_time_not_at_its_edge() -> None:
    facts = [_hot(1, 26), _hot(2, 27), _hot(10, 24)]  # above from 00:01, held past 00:03
    result = _run(_automation(HOT_FOR_2_MIN), facts)
    assert (result.facts, result.triggered, result.fired) == (3, 1, 1)
    assert result.fired_at == [T0 + timedelta(minutes=3)] and result.fired_by_hour == {T0: 1}


def test_a_state_broken_before_its_due_time_does_not_fire() -> None:
    facts = [_hot(1, 26), _hot(2, 24), _hot(20, 30), _hot(21.5, 20)]  # held 1 and 1.5 minutes
    assert _run(_automation(HOT_FOR_2_MIN), facts).triggered == 0


def test_a_timer_due_at_or_after_the_stretchs_end_is_not_counted_one_due_before_is() -> None:
    automation = _automation(HOT_FOR_2_MIN)
    assert _run(automation, [_hot(58.5, 26)]).triggered == 0  # due at 01:00:30, after to
    assert _run(automation, [_hot(58, 26)]).triggered == 0  # due at 01:00, to itself: [from, to)
    held = _run(automation, [_hot(57, 26)])  # due at 00:59 with no fact after it: finish() fires it
    assert held.fired_at == [T0 + timedelta(minutes=59)]


def test_a_report_that_breaks_the_state_after_its_due_time_does_not_cancel_it() -> None:
    facts = [_hot(1, 26), _hot(3, 20), _hot(5, 26), _hot(8, 20)]  # the first break comes as it is due
    result = _run(_automation(HOT_FOR_2_MIN), facts)
    assert result.fired_at == [T0 + timedelta(minutes=3), T0 + timedelta(minutes=7)]


def test_a_for_s_triggers_conditions_are_the_state_at_its_due_time() -> None:
    facts = [_door(0, "open"), _hot(1, 26), _door(2, "closed"), _hot(10, 20), _hot(11, 26), _door(12, "open")]
    result = _run(_automation(HOT_FOR_2_MIN, DOOR_CLOSED), facts)
    assert (result.triggered, result.fired, result.fired_at) == (2, 1, [T0 + timedelta(minutes=3)])


# -------------------------------------------------------------------------------------- time triggers

BERLIN_FALL_BACK = datetime(2026, 10, 20, tzinfo=UTC)  # 2026-10-25 03:00 CEST -> 02:00 CET


def test_a_daily_time_trigger_fires_once_a_day_across_a_dst_change_at_the_zones_time() -> None:
    automation = _automation(Trigger(time=TimeOfDay(at="07:00")))
    result = backtest(
        automation, [], BERLIN_FALL_BACK, BERLIN_FALL_BACK + timedelta(days=10), "Europe/Berlin"
    )
    assert result.fired == result.triggered == 10
    summer = [datetime(2026, 10, day, 5, tzinfo=UTC) for day in range(20, 25)]  # 07:00 CEST
    winter = [datetime(2026, 10, day, 6, tzinfo=UTC) for day in range(25, 30)]  # 07:00 CET
    assert result.fired_at == summer + winter
    in_utc = backtest(automation, [], BERLIN_FALL_BACK, BERLIN_FALL_BACK + timedelta(days=10), "UTC")
    assert in_utc.fired_at[0] == datetime(2026, 10, 20, 7, tzinfo=UTC)  # the zone is the home's


def test_a_repeated_and_a_skipped_wall_clock_time_fire_once_each() -> None:
    repeated = backtest(
        _automation(Trigger(time=TimeOfDay(at="02:30"))), [],
        datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 26, 12, tzinfo=UTC), "Europe/Berlin",
    )  # fmt: skip
    assert repeated.fired_at == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 26, 1, 30, tzinfo=UTC),
    ]
    skipped = backtest(
        _automation(Trigger(time=TimeOfDay(at="02:30"))), [],
        datetime(2026, 3, 28, 12, tzinfo=UTC), datetime(2026, 3, 29, 12, tzinfo=UTC), "Europe/Berlin",
    )  # fmt: skip
    assert skipped.fired_at == [datetime(2026, 3, 29, 1, 0, tzinfo=UTC)]  # the end of the gap, 03:00 CEST


def test_a_time_trigger_sees_the_state_replayed_up_to_its_instant_and_counts_no_fact() -> None:
    automation = _automation(Trigger(time=TimeOfDay(at="14:00")), DOOR_CLOSED)  # 12:00 UTC in Berlin
    facts = [
        (REPORTED, "l1", T0 - timedelta(hours=1), {"door": "closed"}),  # day 1: closed at 12:00
        (REPORTED, "l1", T0 + timedelta(days=1), {"door": "open"}),  # day 2: opened at 12:00 itself
        (REPORTED, "l1", T0 + timedelta(days=2, seconds=1), {"door": "closed"}),  # day 3: a second late
    ]
    start = T0 - timedelta(hours=2)
    result = backtest(automation, facts, start, start + timedelta(days=3), "Europe/Berlin")
    assert (result.facts, result.triggered, result.fired, result.fired_at) == (3, 3, 1, [T0])


def test_the_instants_are_those_in_the_stretch_from_included_to_excluded() -> None:
    automation = _automation(Trigger(time=TimeOfDay(at="12:00")))
    assert _run(automation, [], hours=24).fired_at == [T0]
    just_after = backtest(automation, [], T0, T0 + timedelta(days=1, microseconds=1), "UTC")
    assert just_after.fired_at == [T0, T0 + timedelta(days=1)]
    assert backtest(automation, [], T0 - timedelta(hours=1), T0, "UTC").fired == 0


# ------------------------------------------------------------------------ the same as the live engine


async def _live(
    automation: Automation, facts: list[Replayed], start: datetime, end: datetime, zone: str, step: timedelta
) -> list[tuple[datetime, bool]]:
    """What the engine runs for ``facts``, ticking every ``step`` (facts at a tick's time come first)."""
    view = HomesView()
    view.apply(HomeTimezoneSet(fact_id=uuid.uuid4(), home_id="h", occurred_at=start, recorded_at=start,
                               payload=TimezonePayload(timezone=zone)))  # fmt: skip
    view.apply(AutomationCreated(fact_id=automation.automation_id, home_id="h", occurred_at=start,
                                 recorded_at=start, payload=automation))  # fmt: skip
    clock, path = FakeClock(start), FakeEnginePath()
    engine = Engine(
        view, path, FakeNotify(), owns=lambda h: True, clock=clock, expires_in_s=60, defaults=False
    )
    engine.live = True
    pending = list(facts)
    while clock.now < end:
        while pending and pending[0][2] <= clock.now:
            _, device_id, at, state = pending.pop(0)
            assert state is not None
            payload = StateReportedPayload(reported=state, device_seq=1, device_time=at)
            await engine.on_fact(
                StateReported(event_id=uuid.uuid4(), device_id=device_id, home_id="h", version=2,
                              occurred_at=at, recorded_at=at, payload=payload)
            )  # fmt: skip
        await engine.tick()
        clock.now += step
    ran = [f.payload for f in path.facts if isinstance(f, AutomationRan)]
    return [(r.trigger.due_at or r.trigger.occurred_at, r.fired) for r in ran]


def _random_history(rng: random.Random, start: datetime, span_s: int, every_s: int) -> list[Replayed]:
    facts: list[Replayed] = []
    at = start + timedelta(seconds=rng.randrange(every_s))
    while at < start + timedelta(seconds=span_s):
        if rng.random() < 0.7:
            facts.append((REPORTED, "t1", at, {"ambient_c": rng.choice([20, 24, 26, 30])}))
        else:
            facts.append((REPORTED, "l1", at, {"door": rng.choice(["open", "closed"])}))
        at += timedelta(seconds=rng.randrange(1, every_s))
    return facts


@pytest.mark.parametrize("seed", range(4))
async def test_for_s_fires_what_the_live_engine_fires_on_a_random_history(seed: int) -> None:
    rng = random.Random(seed)
    start = T0
    end = start + timedelta(hours=1)
    facts = _random_history(rng, start, 3600, 90)
    automation = _automation(HOT_FOR_2_MIN, DOOR_CLOSED, created_at=start - timedelta(microseconds=1))
    live = await _live(automation, facts, start, end, "UTC", timedelta(seconds=1))
    result = backtest(automation, facts, start, end, "UTC")
    assert result.triggered == len(live) > 2
    assert result.fired_at == [due for due, fired in live if fired]


@pytest.mark.parametrize("seed", range(2))
async def test_a_time_trigger_fires_what_the_live_engine_fires_across_dst(seed: int) -> None:
    rng = random.Random(seed)
    start = datetime(2026, 10, 23, tzinfo=UTC)
    end = start + timedelta(days=4)
    facts: list[Replayed] = [
        (REPORTED, "l1", start + timedelta(minutes=m), {"door": rng.choice(["open", "closed"])})
        for m in sorted(rng.sample(range(4 * 24 * 60), 40))
    ]
    automation = _automation(
        Trigger(time=TimeOfDay(at="02:30")), DOOR_CLOSED, created_at=start - timedelta(microseconds=1)
    )
    live = await _live(automation, facts, start, end, "Europe/Berlin", timedelta(minutes=1))
    result = backtest(automation, facts, start, end, "Europe/Berlin")
    assert result.triggered == len(live) == 4
    assert result.fired_at == [due for due, fired in live if fired]


def test_delayed_and_plain_triggers_replayed_together_count_what_each_counts_alone() -> None:
    automations = [
        _automation(HOT_FOR_2_MIN, DOOR_CLOSED),
        _automation(Trigger(time=TimeOfDay(at="15:00")), DOOR_CLOSED),  # 13:00 UTC
        _automation(Trigger(state=StateTest(device_id="t1", key="ambient_c", above=25))),
    ]
    facts = _random_history(random.Random(7), T0, 3 * 3600, 120)
    end = T0 + timedelta(hours=3)
    together = HomeReplay(automations, T0, end, "Europe/Berlin")
    for fact in facts:
        together.feed(fact)
    together.finish()
    for automation in automations:
        alone = backtest(automation, facts, T0, end, "Europe/Berlin")
        assert together.results[automation.automation_id] == alone and alone.triggered > 0
