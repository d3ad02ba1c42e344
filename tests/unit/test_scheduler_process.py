"""The scheduler process's logic with a fake command path and a clock the test moves: facts in, commands
and facts out; a restart (a fresh scheduler folding what the first one wrote) sends nothing twice."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from hearth_automations.service.scheduler import Scheduler
from hearth_shared.domain.home_facts import ProgramPayload, ScheduleResumed, ScheduleSet
from hearth_shared.domain.home_view import HomesView
from hearth_shared.domain.schedule import DAYS, ProgramEntry, ScheduledCommand
from hearth_shared.schema.events import CommandRequested, CommandRequestedPayload, SubmitCommand
from tests.support.fakes import FakeClock
from tests.support.fakes import FakeSchedulerPath as FakePath

pytestmark = pytest.mark.unit

START = datetime(2026, 7, 1, 5, 0, tzinfo=UTC)


def program() -> tuple[ProgramEntry, ...]:
    def at(hhmm: str, target: float) -> ProgramEntry:
        return ProgramEntry(
            days=DAYS,
            at=hhmm,
            command=ScheduledCommand(name="set_target_temperature", params={"target_c": target}),
        )

    return (at("06:00", 21), at("09:00", 18))


def schedule_set(at: datetime) -> ScheduleSet:
    return ScheduleSet(
        fact_id=uuid.uuid4(), home_id="h", device_id="t1", occurred_at=at, recorded_at=at,
        payload=ProgramPayload(program=program(), device_type="thermostat"),
    )  # fmt: skip


def requested(command_id: uuid.UUID, at: datetime) -> CommandRequested:
    return CommandRequested(
        event_id=uuid.uuid4(), device_id="t1", home_id="h", version=5, occurred_at=at, recorded_at=at,
        payload=CommandRequestedPayload(
            command_id=command_id, name="set_target_temperature", params={"target_c": 25}, expires_at=at
        ),
    )  # fmt: skip


def scheduler(path: FakePath, clock: FakeClock) -> Scheduler:
    return Scheduler(HomesView(), path, owns=lambda home: True, clock=clock, expires_in_s=60)


async def test_fires_on_time_once_and_a_restart_sends_nothing_twice() -> None:
    clock, path = FakeClock(START), FakePath()
    first = scheduler(path, clock)
    await first.on_home_fact(schedule_set(START))
    await first.go_live()
    assert await first.tick() == 0
    clock.now = START + timedelta(hours=1)  # 06:00
    assert await first.tick() == 1
    assert await first.tick() == 0
    assert path.requests[0].params == {"target_c": 21}
    # a restart: a fresh process folds the home journal (what the first one wrote included)
    restarted = scheduler(FakePath(), clock)
    for fact in [schedule_set(START), *path.facts]:
        await restarted.on_home_fact(fact)
    await restarted.go_live()
    assert await restarted.tick() == 0


async def test_a_persons_command_holds_and_resume_ends_the_hold() -> None:
    clock, path = FakeClock(START), FakePath()
    s = scheduler(path, clock)
    await s.on_home_fact(schedule_set(START))
    await s.go_live()
    clock.now = START + timedelta(hours=1, seconds=1)
    await s.tick()
    own = path.requests[-1].command_id
    await s.on_journal_fact(requested(own, clock.now))  # its own command: no hold
    assert s.view.schedules["t1"].hold_until is None
    person = uuid.uuid4()
    clock.now += timedelta(minutes=30)
    await s.on_journal_fact(requested(person, clock.now))
    assert s.view.schedules["t1"].hold_until == START + timedelta(hours=4)
    for fact in list(path.facts):  # its own facts come back from the home journal: nothing changes
        await s.on_home_fact(fact)
    resumed = ScheduleResumed(fact_id=uuid.uuid4(), home_id="h", device_id="t1", occurred_at=clock.now,
                              recorded_at=clock.now)  # fmt: skip
    await s.on_home_fact(resumed)
    assert s.view.schedules["t1"].hold_until is None
    assert path.requests[-1].params == {"target_c": 21} and len(path.requests) == 2
    for fact in path.facts[-1:]:
        await s.on_home_fact(fact)
    await s.on_journal_fact(requested(path.requests[-1].command_id, clock.now))  # the resume's command
    assert s.view.schedules["t1"].hold_until is None
    # the echo of the hold fact read after the resume must not bring the hold back
    replay = HomesView()
    for fact in [schedule_set(START), *path.facts[:-1], resumed, path.facts[-1]]:
        replay.apply(fact)
    assert replay.schedules["t1"].hold_until is None


class EchoingPath(FakePath):
    """A command path whose command comes back from the journal before ``submit`` returns (the device
    actor faster than the scheduler's own fact)."""

    scheduler: Scheduler

    async def send_request(self, request: SubmitCommand) -> None:
        await super().send_request(request)
        await self.scheduler.on_journal_fact(requested(request.command_id, request.sent_at))


async def test_its_own_command_read_back_before_its_fact_is_no_hold() -> None:
    clock, path = FakeClock(START + timedelta(hours=2)), EchoingPath()
    s = path.scheduler = scheduler(path, clock)
    await s.on_home_fact(schedule_set(START))
    await s.go_live()
    await s.on_home_fact(
        ScheduleResumed(
            fact_id=uuid.uuid4(), home_id="h", device_id="t1", occurred_at=clock.now, recorded_at=clock.now
        )
    )
    assert len(path.requests) == 1
    assert s.view.schedules["t1"].hold_until is None
    assert not [f for f in path.facts if f.__struct_config__.tag == "schedule.hold_started"]
