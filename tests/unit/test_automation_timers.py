"""Delayed triggers through the engine with a fake clock and a fake command path: a state held for
``for_s`` (the timer starts on the edge, a report that breaks the test cancels it, a restarted engine
recomputes it from the journal it replays and fires it once), time triggers in the home's zone across
both DST changes of Europe/Berlin and America/New_York (each instant once, a skipped time at the end of
the gap, a repeated one at its first occurrence, once across restarts and after an outage), and a
command action for a quarantined device skipped with its reason."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hearth_automations.service.engine import Engine
from hearth_shared.domain.automation import (
    Action,
    Automation,
    CommandAction,
    NotifyAction,
    StateTest,
    TimeOfDay,
    Trigger,
    run_id,
    time_trigger_id,
)
from hearth_shared.domain.home_facts import (
    AutomationCreated,
    AutomationRan,
    HomeFact,
    HomeTimezoneSet,
    TimezonePayload,
)
from hearth_shared.domain.home_view import HomesView
from hearth_shared.schema.events import (
    DeviceQuarantined,
    DeviceReleased,
    Event,
    QuarantinedPayload,
    ReleasedPayload,
    StateReported,
    StateReportedPayload,
)
from tests.support.fakes import FakeClock, FakeEnginePath, FakeNotify

pytestmark = pytest.mark.unit

T0 = datetime(2026, 7, 1, 12, tzinfo=UTC)
TURN_OFF = Action(command=CommandAction(device_id="t2", name="set_hvac_mode", params={"mode": "off"}))


def automation(trigger: Trigger, created_at: datetime = T0, *actions: Action) -> Automation:
    return Automation(
        automation_id=uuid.uuid4(), home_id="h", name="a", trigger=trigger, actions=actions or (TURN_OFF,),
        mode="parallel", created_at=created_at,
    )  # fmt: skip


def created(a: Automation) -> AutomationCreated:
    return AutomationCreated(
        fact_id=a.automation_id, home_id="h", occurred_at=a.created_at, recorded_at=a.created_at, payload=a
    )


def report(at: datetime, device_id: str = "t1", **state: Any) -> StateReported:
    return StateReported(
        event_id=uuid.uuid4(), device_id=device_id, home_id="h", version=2, occurred_at=at, recorded_at=at,
        payload=StateReportedPayload(reported=state, device_seq=1, device_time=at),
    )  # fmt: skip


def engine(clock: FakeClock, path: FakeEnginePath, facts: list[HomeFact]) -> Engine:
    """An engine that has read these home facts (a restarted one: the home journal so far)."""
    view = HomesView()
    for fact in facts:
        view.apply(fact)
    e = Engine(view, path, FakeNotify(), owns=lambda h: True, clock=clock, expires_in_s=60, defaults=False)
    e.live = True
    return e


def runs(path: FakeEnginePath) -> list[AutomationRan]:
    return [f for f in path.facts if isinstance(f, AutomationRan)]


HOT = Trigger(state=StateTest(device_id="t1", key="ambient_c", above=25, for_s=60))

# ------------------------------------------------------------------------------------- held for for_s


async def test_a_state_held_for_for_s_fires_once_when_due_with_the_edge_as_its_trigger() -> None:
    a = automation(HOT)
    clock, path = FakeClock(T0), FakeEnginePath()
    e = engine(clock, path, [created(a)])
    edge = report(T0 + timedelta(seconds=10), ambient_c=26)
    await e.on_fact(report(T0 + timedelta(seconds=5), ambient_c=24))
    await e.on_fact(edge)
    await e.on_fact(report(T0 + timedelta(seconds=40), ambient_c=27))  # still holding: no new timer
    clock.now = T0 + timedelta(seconds=69)
    assert await e.tick() == 0 and path.requests == []
    clock.now = T0 + timedelta(seconds=70)
    assert await e.tick() == 1
    assert await e.tick() == 0  # once
    assert [r.command_id for r in path.requests] == [runs(path)[0].payload.actions[0].action_id]
    run = runs(path)[0].payload
    assert run.run_id == run_id(a.automation_id, edge.event_id) and run.fired
    assert run.trigger.fact_id == edge.event_id and run.trigger.due_at == T0 + timedelta(seconds=70)


async def test_a_report_that_breaks_the_test_before_for_s_cancels_the_timer() -> None:
    a = automation(HOT)
    clock, path = FakeClock(T0), FakeEnginePath()
    e = engine(clock, path, [created(a)])
    await e.on_fact(report(T0 + timedelta(seconds=10), ambient_c=26))
    await e.on_fact(report(T0 + timedelta(seconds=30), humidity_pct=40))  # another key: changes nothing
    await e.on_fact(report(T0 + timedelta(seconds=50), ambient_c=24))  # broken at 40 s of 60
    clock.now = T0 + timedelta(hours=1)
    assert await e.tick() == 0
    assert path.requests == [] and runs(path) == []
    # holding again starts a new timer, from the new edge
    again = report(T0 + timedelta(hours=1, seconds=1), ambient_c=30)
    await e.on_fact(again)
    clock.now = T0 + timedelta(hours=1, seconds=61)
    assert await e.tick() == 1 and runs(path)[0].payload.trigger.fact_id == again.event_id


async def test_an_edge_older_than_the_automation_starts_no_timer() -> None:
    a = automation(HOT, created_at=T0 + timedelta(seconds=20))
    clock, path = FakeClock(T0 + timedelta(hours=1)), FakeEnginePath()
    e = engine(clock, path, [created(a)])
    await e.on_fact(report(T0 + timedelta(seconds=10), ambient_c=26))
    assert await e.tick() == 0 and path.requests == []


async def test_a_restarted_engine_recomputes_the_timer_from_the_journal_and_fires_it_once() -> None:
    a = automation(HOT)
    journal: list[Event] = [
        report(T0 + timedelta(seconds=10), ambient_c=26),  # the edge
        report(T0 + timedelta(seconds=30), ambient_c=28),
    ]
    clock, first = FakeClock(T0 + timedelta(seconds=31)), FakeEnginePath()
    e = engine(clock, first, [created(a)])
    for fact in journal:
        await e.on_fact(fact)
    assert await e.tick() == 0  # killed here, 29 s before the timer was due: nothing was written
    assert first.facts == []

    clock.now = T0 + timedelta(minutes=5)  # back after the timer was due
    second = FakeEnginePath()
    restarted = engine(clock, second, [created(a)])
    for fact in journal:  # the device journal, replayed from its start
        await restarted.on_fact(fact)
    assert await restarted.tick() == 1
    assert len(second.requests) == 1 and len(runs(second)) == 1

    third = FakeEnginePath()  # and restarted again: the run is in the home journal, nothing twice
    again = engine(clock, third, [created(a), *second.facts])
    for fact in journal:
        await again.on_fact(fact)
    assert await again.tick() == 0 and third.requests == []


async def test_a_timer_due_before_the_report_that_broke_it_fires_on_replay() -> None:
    """Down while the state held for for_s and then stopped holding: it had held, so it fires, once."""
    a = automation(HOT)
    clock, path = FakeClock(T0 + timedelta(hours=2)), FakeEnginePath()
    e = engine(clock, path, [created(a)])
    edge = report(T0 + timedelta(seconds=10), ambient_c=26)
    await e.on_fact(edge)
    await e.on_fact(report(T0 + timedelta(seconds=100), ambient_c=20))  # broke it 30 s after it was due
    assert len(path.requests) == 1 and runs(path)[0].payload.trigger.fact_id == edge.event_id
    assert await e.tick() == 0


async def test_a_switched_off_automation_forgets_its_timer() -> None:
    from hearth_shared.domain.home_facts import AutomationSwitched, SwitchPayload

    a = automation(HOT)
    clock, path = FakeClock(T0), FakeEnginePath()
    e = engine(clock, path, [created(a)])
    await e.on_fact(report(T0 + timedelta(seconds=10), ambient_c=26))
    switch = SwitchPayload(automation_id=a.automation_id, enabled=False)
    e.view.apply(
        AutomationSwitched(fact_id=uuid.uuid4(), home_id="h", occurred_at=T0, recorded_at=T0, payload=switch)
    )
    clock.now = T0 + timedelta(hours=1)
    assert await e.tick() == 0 and path.requests == []


# --------------------------------------------------------------------------------------- time triggers


def zone_set(name: str, at: datetime) -> HomeTimezoneSet:
    return HomeTimezoneSet(
        fact_id=uuid.uuid4(),
        home_id="h",
        occurred_at=at,
        recorded_at=at,
        payload=TimezonePayload(timezone=name),
    )


async def fired_instants(e: Engine, clock: FakeClock, path: FakeEnginePath, end: datetime) -> list[datetime]:
    """Tick every 5 minutes until ``end``; the instants the runs were for."""
    while clock.now < end:
        clock.now += timedelta(minutes=5)
        await e.tick()
    return [r.payload.trigger.occurred_at for r in runs(path)]


@pytest.mark.parametrize(
    ("zone", "at", "start", "expected"),
    [
        # Berlin, spring forward 2026-03-29 02:00 -> 03:00: 02:30 does not exist, it fires at 03:00 CEST
        ("Europe/Berlin", "02:30", datetime(2026, 3, 28, 12, tzinfo=UTC),
         [datetime(2026, 3, 29, 1, 0, tzinfo=UTC), datetime(2026, 3, 30, 0, 30, tzinfo=UTC)]),
        # Berlin, fall back 2026-10-25 03:00 -> 02:00: 02:30 happens twice, it fires at the first (CEST)
        ("Europe/Berlin", "02:30", datetime(2026, 10, 24, 12, tzinfo=UTC),
         [datetime(2026, 10, 25, 0, 30, tzinfo=UTC), datetime(2026, 10, 26, 1, 30, tzinfo=UTC)]),
        # New York, spring forward 2026-03-08 02:00 -> 03:00: 02:30 fires at 03:00 EDT
        ("America/New_York", "02:30", datetime(2026, 3, 7, 12, tzinfo=UTC),
         [datetime(2026, 3, 8, 7, 0, tzinfo=UTC), datetime(2026, 3, 9, 6, 30, tzinfo=UTC)]),
        # New York, fall back 2026-11-01 02:00 -> 01:00: 01:30 happens twice, it fires at the first (EDT)
        ("America/New_York", "01:30", datetime(2026, 10, 31, 12, tzinfo=UTC),
         [datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 2, 6, 30, tzinfo=UTC)]),
    ],
)  # fmt: skip
async def test_a_time_trigger_fires_each_day_once_across_dst(
    zone: str, at: str, start: datetime, expected: list[datetime]
) -> None:
    a = automation(Trigger(time=TimeOfDay(at=at)), start)
    clock, path = FakeClock(start), FakeEnginePath()
    e = engine(clock, path, [zone_set(zone, start), created(a)])
    end = start + timedelta(days=2)
    assert await fired_instants(e, clock, path, end) == expected
    assert [r.command_id for r in path.requests] == [r.payload.actions[0].action_id for r in runs(path)]
    assert [r.payload.run_id for r in runs(path)] == [
        run_id(a.automation_id, time_trigger_id(a.automation_id, instant)) for instant in expected
    ]
    # a restart replays the home journal: no instant fires again
    again = FakeEnginePath()
    restarted = engine(clock, again, [zone_set(zone, start), created(a), *path.facts])
    assert await restarted.tick() == 0 and again.facts == []


async def test_after_an_outage_a_time_trigger_fires_the_latest_missed_instant_once() -> None:
    start = datetime(2026, 7, 6, 0, tzinfo=UTC)  # a Monday
    a = automation(Trigger(time=TimeOfDay(at="07:00", days=("mon", "wed"))), start)
    clock, path = FakeClock(start), FakeEnginePath()
    e = engine(clock, path, [zone_set("Europe/Berlin", start), created(a)])
    assert await fired_instants(e, clock, path, start + timedelta(hours=6)) == [
        datetime(2026, 7, 6, 5, 0, tzinfo=UTC)  # Monday 07:00 CEST
    ]
    clock.now = datetime(2026, 7, 11, 12, tzinfo=UTC)  # down from Monday until Saturday
    restarted_path = FakeEnginePath()
    restarted = engine(clock, restarted_path, [zone_set("Europe/Berlin", start), created(a), *path.facts])
    assert await restarted.tick() == 1 and await restarted.tick() == 0
    assert [r.payload.trigger.occurred_at for r in runs(restarted_path)] == [
        datetime(2026, 7, 8, 5, 0, tzinfo=UTC)  # Wednesday's, once; not Tuesday (not one of its days)
    ]


# ---------------------------------------------------------------------------------------- quarantine


async def test_a_command_for_a_quarantined_device_is_skipped_and_the_run_says_why() -> None:
    notify_too = Action(notify=NotifyAction(message="hot"))
    a = automation(
        Trigger(state=StateTest(device_id="t1", key="ambient_c", above=25)), T0, TURN_OFF, notify_too
    )
    clock, path = FakeClock(T0), FakeEnginePath()
    e = engine(clock, path, [created(a)])
    quarantined = DeviceQuarantined(
        event_id=uuid.uuid4(), device_id="t2", home_id="h", version=5, occurred_at=T0, recorded_at=T0,
        payload=QuarantinedPayload(reason="bad firmware", since=T0),
    )  # fmt: skip
    await e.on_fact(quarantined)
    await e.on_fact(report(T0 + timedelta(seconds=1), ambient_c=30))
    assert path.requests == []
    (run,) = runs(path)
    command, notify = run.payload.actions
    assert run.payload.fired and command.skipped == "quarantined" and command.detail == "bad firmware"
    assert notify.kind == "notify" and notify.skipped is None
    released = DeviceReleased(
        event_id=uuid.uuid4(), device_id="t2", home_id="h", version=6, occurred_at=T0, recorded_at=T0,
        payload=ReleasedPayload(reason="bad firmware"),
    )  # fmt: skip
    await e.on_fact(released)
    await e.on_fact(report(T0 + timedelta(seconds=2), ambient_c=20))
    await e.on_fact(report(T0 + timedelta(seconds=3), ambient_c=30))
    assert [(r.device_id, r.name) for r in path.requests] == [("t2", "set_hvac_mode")]
