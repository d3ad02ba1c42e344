"""Preheat in the scheduler, with a fake command path and a clock the test moves: an entry with preheat
is sent as early as the room's learned response needs from the temperatures now, as that transition
(its own command id), once; its fact says how early and why; without a learned response it is sent on
time and says so; a transition that does not raise the target is not preheated; nor is a held device.
The schedule's view keeps the latest preheat (entry, lead, reason) until a new program."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from hearth_automations.service.scheduler import Scheduler
from hearth_shared.domain.home_facts import (
    ProgramPayload,
    RoomResponseFitted,
    ScheduleSet,
    ScheduleTransitionFired,
)
from hearth_shared.domain.home_view import HomesView
from hearth_shared.domain.room_response import CAP_S, ResponseFit, RoomResponse, preheat_lead
from hearth_shared.domain.schedule import DAYS, ProgramEntry, ScheduledCommand, transition_command_id
from tests.support.fakes import FakeClock
from tests.support.fakes import FakeSchedulerPath as FakePath

pytestmark = pytest.mark.unit

START = datetime(2026, 1, 7, 0, 0, tzinfo=UTC)
WAKE = START.replace(hour=6, minute=30)
FIT = ResponseFit(base_c_per_h=4.0, per_degree_per_h=-0.125, samples=80, rmse_c_per_h=0.3)


def program(preheat: bool = True) -> tuple[ProgramEntry, ...]:
    def at(hhmm: str, target: float, preheat: bool = False) -> ProgramEntry:
        command = ScheduledCommand(name="set_target_temperature", params={"target_c": target})
        return ProgramEntry(days=DAYS, at=hhmm, command=command, preheat=preheat)

    return (at("06:30", 21.0, preheat), at("22:30", 17.0, preheat))


F = TypeVar("F", ScheduleSet, RoomResponseFitted)


def about_t1(fact: Callable[..., F], payload: Any, at: datetime = START) -> F:
    """A home fact about the thermostat ``t1`` of home ``h``."""
    return fact(
        fact_id=uuid.uuid4(), home_id="h", device_id="t1", occurred_at=at, recorded_at=at, payload=payload
    )


def program_set(at: datetime, preheat: bool = True) -> ScheduleSet:
    return about_t1(ScheduleSet, ProgramPayload(program=program(preheat), device_type="thermostat"), at)


async def started(
    clock: FakeClock, path: FakePath, reported: dict[str, Any], *, learned: bool = True, preheat: bool = True
) -> Scheduler:
    scheduler = Scheduler(
        HomesView(), path, owns=lambda home: True, clock=clock, expires_in_s=60,
        readings=lambda device: reported if device == "t1" else {},
    )  # fmt: skip
    await scheduler.on_home_fact(program_set(START, preheat))
    if learned:
        await scheduler.on_home_fact(response_learned())
    await scheduler.go_live()
    return scheduler


def response_learned() -> RoomResponseFitted:
    return about_t1(RoomResponseFitted, RoomResponse(heating=FIT, fitted_from=START, fitted_to=START))


def fired(path: FakePath) -> list[ScheduleTransitionFired]:
    return [f for f in path.facts if isinstance(f, ScheduleTransitionFired)]


async def test_a_preheat_entry_starts_as_early_as_the_room_needs_once() -> None:
    reported = {"ambient_c": 17.0, "outdoor_c": 5.0, "target_c": 17.0}
    lead = preheat_lead(RoomResponse(heating=FIT, fitted_from=START, fitted_to=START), 17.0, 5.0, 21.0)
    assert 3600 < lead.lead_s < 2 * 3600
    clock, path = FakeClock(WAKE - timedelta(hours=3)), FakePath()
    scheduler = await started(clock, path, reported)
    assert await scheduler.tick() == 0
    clock.now = WAKE - timedelta(seconds=lead.lead_s + 60)  # a minute before the lead
    assert await scheduler.tick() == 0
    clock.now = WAKE - timedelta(seconds=lead.lead_s)
    assert await scheduler.tick() == 1
    (fact,) = fired(path)
    assert fact.payload.reason == "preheat"
    assert fact.payload.instant == WAKE  # as the 06:30 transition, with its own command id
    assert fact.payload.command_id == transition_command_id("t1", WAKE) == path.requests[0].command_id
    assert fact.payload.preheat is not None
    assert (fact.payload.preheat.lead_s, fact.payload.preheat.reason) == (lead.lead_s, "reaches_target")
    assert (fact.payload.preheat.indoor_c, fact.payload.preheat.outdoor_c) == (17.0, 5.0)
    for minutes in (10, lead.lead_s // 60, lead.lead_s // 60 + 5):
        clock.now = WAKE - timedelta(seconds=lead.lead_s) + timedelta(minutes=minutes)
        assert await scheduler.tick() == 0  # not again, neither before nor at its time
    assert len(path.requests) == 1


async def test_a_schedule_set_inside_the_window_starts_its_preheat_on_the_second_not_a_look_later() -> None:
    reported = {"ambient_c": 17.0, "outdoor_c": 5.0, "target_c": 17.0}
    lead = preheat_lead(RoomResponse(heating=FIT, fitted_from=START, fitted_to=START), 17.0, 5.0, 21.0)
    starts = WAKE - timedelta(seconds=lead.lead_s)
    clock, path = FakeClock(starts - timedelta(seconds=73)), FakePath()  # off the transition's minute
    scheduler = await started(clock, path, reported)
    while await scheduler.tick() == 0:  # the service ticks every 0.25 s; a second is fine enough here
        clock.now += timedelta(seconds=1)
    assert clock.now == starts  # a look every minute alone would start it 47 s late


async def test_a_reading_or_a_response_that_comes_after_the_look_starts_the_preheat_within_seconds() -> None:
    temperatures = {"ambient_c": 17.0, "outdoor_c": 5.0, "target_c": 17.0}
    lead = preheat_lead(RoomResponse(heating=FIT, fitted_from=START, fitted_to=START), 17.0, 5.0, 21.0)
    inside = WAKE - timedelta(seconds=lead.lead_s - 600)  # inside the lead: it starts as soon as it can
    # the first look has no temperature yet (the journal's follower behind): the next is 5 s later
    reported: dict[str, Any] = {}
    clock, path = FakeClock(inside), FakePath()
    scheduler = await started(clock, path, reported)
    assert await scheduler.tick() == 0
    reported.update(temperatures)
    clock.now += timedelta(seconds=4)
    assert await scheduler.tick() == 0
    clock.now += timedelta(seconds=1)
    assert await scheduler.tick() == 1  # not a minute later
    # the first look has no learned response: the response, once folded, wakes the schedule
    clock, path = FakeClock(inside), FakePath()
    scheduler = await started(clock, path, temperatures, learned=False)
    assert await scheduler.tick() == 0
    await scheduler.on_home_fact(response_learned())
    clock.now += timedelta(seconds=1)
    assert await scheduler.tick() == 1
    (fact,) = fired(path)
    assert fact.payload.preheat is not None and fact.payload.preheat.reason == "reaches_target"


async def test_the_schedule_keeps_the_latest_preheat_until_a_new_program() -> None:
    clock, path = FakeClock(WAKE - timedelta(hours=3)), FakePath()
    scheduler = await started(clock, path, {"ambient_c": 17.0, "outdoor_c": 5.0, "target_c": 17.0})
    while not path.requests:
        clock.now += timedelta(minutes=1)
        await scheduler.tick()
    (fact,) = fired(path)
    last = scheduler.view.schedules["t1"].last_preheat
    assert last is not None and fact.payload.preheat is not None
    assert (last.entry, last.instant, last.preheat) == (0, WAKE, fact.payload.preheat)
    assert last.preheat.lead_s > 0
    view = HomesView()  # another reader of the home journal: the same, also folding the fact twice
    for folded in (program_set(START), fact, fact):
        view.apply(folded)
    assert view.schedules["t1"].last_preheat == last
    view.apply(program_set(clock.now))
    assert view.schedules["t1"].last_preheat is None  # its entries were another program's


async def test_a_colder_room_starts_earlier() -> None:
    leads = []
    for indoor in (18.0, 16.0):
        clock, path = FakeClock(WAKE - timedelta(hours=3)), FakePath()
        scheduler = await started(clock, path, {"ambient_c": indoor, "outdoor_c": 0.0, "target_c": 17.0})
        while not path.requests:
            clock.now += timedelta(minutes=1)
            await scheduler.tick()
        leads.append(WAKE - clock.now)
    assert leads[1] > leads[0] + timedelta(minutes=20)


async def test_without_a_learned_response_it_fires_on_time_and_says_why() -> None:
    clock, path = FakeClock(WAKE - timedelta(hours=3)), FakePath()
    scheduler = await started(clock, path, {"ambient_c": 17.0, "outdoor_c": 0.0}, learned=False)
    while not path.requests:
        clock.now += timedelta(minutes=1)
        await scheduler.tick()
    (fact,) = fired(path)
    assert clock.now == WAKE and fact.payload.reason == "transition"
    assert fact.payload.preheat is not None
    assert (fact.payload.preheat.lead_s, fact.payload.preheat.reason) == (0, "no_response")


async def test_a_lowered_target_and_an_entry_without_preheat_fire_on_time() -> None:
    for reported, preheat in (({"ambient_c": 17.0, "outdoor_c": 0.0, "target_c": 22.0}, True),
                              ({"ambient_c": 17.0, "outdoor_c": 0.0, "target_c": 17.0}, False)):  # fmt: skip
        clock, path = FakeClock(WAKE - timedelta(hours=3)), FakePath()
        scheduler = await started(clock, path, reported, preheat=preheat)
        while not path.requests:
            clock.now += timedelta(minutes=1)
            await scheduler.tick()
        assert clock.now == WAKE
        (fact,) = fired(path)
        assert fact.payload.reason == "transition" and fact.payload.preheat is None


async def test_a_room_needing_more_than_the_cap_starts_at_it_and_its_fact_says_what_it_needed() -> None:
    clock, path = FakeClock(WAKE - timedelta(seconds=CAP_S + 3600)), FakePath()
    scheduler = await started(clock, path, {"ambient_c": 12.0, "outdoor_c": 0.0, "target_c": 12.0})
    while not path.requests:
        clock.now += timedelta(minutes=1)
        await scheduler.tick()
    assert WAKE - clock.now == timedelta(seconds=CAP_S)  # the cap (the scheduler's preheat_max_s)
    (fact,) = fired(path)
    preheat = fact.payload.preheat
    assert preheat is not None and (preheat.lead_s, preheat.reason) == (CAP_S, "capped")
    assert preheat.needed_s is not None and preheat.needed_s > CAP_S  # 12 -> 21 °C at 0 °C outside
    assert scheduler.view.schedules["t1"].last_preheat is not None
    assert scheduler.view.schedules["t1"].last_preheat.preheat.needed_s == preheat.needed_s


async def test_a_household_cap_on_the_schedule_lets_such_a_room_start_as_early_as_it_needs() -> None:
    clock, path = FakeClock(WAKE - timedelta(hours=7)), FakePath()
    scheduler = await started(clock, path, {"ambient_c": 12.0, "outdoor_c": 0.0, "target_c": 12.0})
    six_hours = ScheduleSet(
        fact_id=uuid.uuid4(), home_id="h", device_id="t1", occurred_at=START, recorded_at=START,
        payload=ProgramPayload(program=program(), device_type="thermostat", preheat_max_s=6 * 3600),
    )  # fmt: skip
    await scheduler.on_home_fact(six_hours)
    assert scheduler.view.schedules["t1"].preheat_max_s == 6 * 3600
    needed = preheat_lead(RoomResponse(heating=FIT, fitted_from=START, fitted_to=START), 12.0, 0.0, 21.0)
    assert needed.needed_s is not None and CAP_S < needed.needed_s < 6 * 3600
    while not path.requests:
        clock.now += timedelta(minutes=1)
        await scheduler.tick()
    (fact,) = fired(path)
    assert fact.payload.preheat is not None and fact.payload.preheat.reason == "reaches_target"
    assert WAKE - clock.now == timedelta(seconds=fact.payload.preheat.lead_s)
    assert abs(fact.payload.preheat.lead_s - needed.needed_s) <= 60  # minute steps against the closed form
