"""Schedule transitions in a home's zone across both DST changes (Europe/Berlin, America/New_York), and the
scheduler's decisions (fires once, catch-up after an outage, holds, resume) with a clock a test moves."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from hearth_shared.domain.schedule import (
    DAYS,
    ProgramEntry,
    ScheduledCommand,
    ScheduleInvalid,
    check_program,
    in_force,
    transition_command_id,
    transitions,
    upcoming,
    zone,
)
from hearth_shared.domain.schedule_hold import DeviceSchedule, due, fired, hold, is_own_command, resume
from tests.support.fakes import FakeClock

pytestmark = pytest.mark.unit

BERLIN, NEW_YORK = zone("Europe/Berlin"), zone("America/New_York")


def entry(at: str, target: float, days: tuple[str, ...] = DAYS) -> ProgramEntry:
    return ProgramEntry(
        days=days, at=at, command=ScheduledCommand(name="set_target_temperature", params={"target_c": target})
    )


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def fired_between(
    program: list[ProgramEntry], tz_name: str, start: datetime, end: datetime
) -> list[datetime]:
    """Drive the scheduler minute by minute (a clock that a test moves) and list what it fires."""
    clock = FakeClock(start)
    state = DeviceSchedule(
        device_id="t1", home_id="h", program=tuple(program), timezone=tz_name, set_at=start
    )
    sent: list[datetime] = []
    while clock.now < end:
        clock.now += timedelta(minutes=1)
        firing = due(state, clock())
        if firing is not None:
            sent.append(firing.transition.instant)
            state = fired(state, firing)
    return sent


@pytest.mark.parametrize(
    ("tz_name", "day", "at", "expected_utc"),
    [
        # spring forward: 02:00 -> 03:00 local; a skipped time fires at the end of the gap
        ("Europe/Berlin", (2026, 3, 29), "02:30", utc(2026, 3, 29, 1, 0)),
        ("Europe/Berlin", (2026, 3, 29), "01:59", utc(2026, 3, 29, 0, 59)),
        ("Europe/Berlin", (2026, 3, 29), "03:00", utc(2026, 3, 29, 1, 0)),
        ("America/New_York", (2026, 3, 8), "02:15", utc(2026, 3, 8, 7, 0)),
        # fall back: 03:00 -> 02:00 (Berlin), 02:00 -> 01:00 (New York); a repeated time fires the first time
        ("Europe/Berlin", (2026, 10, 25), "02:30", utc(2026, 10, 25, 0, 30)),
        ("America/New_York", (2026, 11, 1), "01:30", utc(2026, 11, 1, 5, 30)),
        # plain days
        ("Europe/Berlin", (2026, 7, 1), "07:00", utc(2026, 7, 1, 5, 0)),
        ("America/New_York", (2026, 1, 5), "07:00", utc(2026, 1, 5, 12, 0)),
    ],
)
def test_a_wall_clock_time_resolves_by_the_contracts_dst_rules(
    tz_name: str, day: tuple[int, int, int], at: str, expected_utc: datetime
) -> None:
    tz = zone(tz_name)
    start = datetime(*day, tzinfo=tz) - timedelta(hours=2)
    found = list(transitions([entry(at, 20)], tz, start, start + timedelta(days=1)))
    assert found[0].instant == expected_utc
    assert found[0].local.utcoffset() == expected_utc.astimezone(tz).utcoffset()


@pytest.mark.parametrize(
    ("tz_name", "start", "gap_or_fold_at"),
    [
        ("Europe/Berlin", utc(2026, 3, 27), "02:30"),
        ("Europe/Berlin", utc(2026, 10, 23), "02:30"),
        ("America/New_York", utc(2026, 3, 6), "02:30"),
        ("America/New_York", utc(2026, 10, 30), "01:30"),
    ],
)
def test_each_transition_fires_exactly_once_a_day_across_a_dst_change(
    tz_name: str, start: datetime, gap_or_fold_at: str
) -> None:
    program = [entry("00:30", 17), entry(gap_or_fold_at, 19), entry("06:45", 21), entry("22:00", 16)]
    sent = fired_between(program, tz_name, start, start + timedelta(days=4))
    assert len(sent) == len(set(sent)) == 4 * 4  # four entries, four days, none twice, none missing
    tz = zone(tz_name)
    per_day: dict[object, int] = {}
    for instant in sent:
        per_day[instant.astimezone(tz).date()] = per_day.get(instant.astimezone(tz).date(), 0) + 1
    assert all(n == 4 for n in list(per_day.values())[1:-1])


def test_two_times_inside_one_gap_are_one_transition_the_later_ones_command() -> None:
    program = [entry("02:10", 18), entry("02:50", 22.5)]
    found = list(transitions(program, BERLIN, utc(2026, 3, 28, 23), utc(2026, 3, 29, 3)))
    assert [(t.instant, t.command.params["target_c"]) for t in found] == [(utc(2026, 3, 29, 1), 22.5)]


def test_days_are_the_homes_local_days() -> None:
    program = [entry("23:30", 18, days=("mon",))]
    # Monday 23:30 in New York is Tuesday 03:30 / 04:30 UTC
    found = list(transitions(program, NEW_YORK, utc(2026, 1, 4), utc(2026, 1, 12)))
    assert [t.instant for t in found] == [utc(2026, 1, 6, 4, 30)]
    assert found[0].local.strftime("%a %H:%M") == "Mon 23:30"


def test_after_an_outage_only_the_transition_in_force_fires_once() -> None:
    program = [entry("06:00", 21), entry("09:00", 18), entry("17:00", 21), entry("22:00", 16)]
    set_at = utc(2026, 7, 1, 0, 0)
    state = DeviceSchedule(device_id="t1", home_id="h", program=tuple(program), timezone="UTC", set_at=set_at)
    back = utc(2026, 7, 1, 18, 30)  # down since before 06:00: 06:00, 09:00 and 17:00 were missed
    firing = due(state, back)
    assert firing is not None and firing.transition.instant == utc(2026, 7, 1, 17)
    state = fired(state, firing)
    assert due(state, back) is None
    assert due(state, back + timedelta(minutes=30)) is None
    later = due(state, utc(2026, 7, 1, 22, 0, 5))
    assert later is not None and later.transition.command.params == {"target_c": 16}


def test_setting_a_program_does_not_replay_the_past() -> None:
    state = DeviceSchedule(
        device_id="t1", home_id="h", program=(entry("06:00", 21),), timezone="UTC", set_at=utc(2026, 7, 1, 12)
    )
    assert due(state, utc(2026, 7, 1, 12, 1)) is None
    firing = due(state, utc(2026, 7, 2, 6))
    assert firing is not None


def test_the_command_id_is_derived_from_device_and_instant() -> None:
    instant = utc(2026, 3, 29, 1)
    assert transition_command_id("t1", instant) == transition_command_id("t1", instant.astimezone(BERLIN))
    assert transition_command_id("t1", instant) != transition_command_id("t2", instant)
    assert transition_command_id("t1", instant) != transition_command_id("t1", instant + timedelta(seconds=1))


def test_two_schedulers_deciding_the_same_moment_send_the_same_command_id() -> None:
    state = DeviceSchedule(
        device_id="t1",
        home_id="h",
        program=(entry("06:00", 21),),
        timezone="Europe/Berlin",
        set_at=utc(2026, 1, 1),
    )
    a, b = due(state, utc(2026, 1, 2, 5, 0, 1)), due(state, utc(2026, 1, 2, 5, 0, 40))
    assert a is not None and b is not None and a.command_id == b.command_id


def test_a_persons_command_holds_until_the_next_transition_then_resume_reapplies() -> None:
    program = (entry("06:00", 21), entry("09:00", 18))
    state = DeviceSchedule(
        device_id="t1", home_id="h", program=program, timezone="UTC", set_at=utc(2026, 7, 1)
    )
    mine = due(state, utc(2026, 7, 1, 6))
    assert mine is not None
    state = fired(state, mine)
    assert is_own_command(state, mine.command_id, utc(2026, 7, 1, 6, 0, 1))
    person = uuid.uuid4()
    assert not is_own_command(state, person, utc(2026, 7, 1, 7))
    held = hold(state, person, utc(2026, 7, 1, 7))
    assert held is not None and held.hold_until == utc(2026, 7, 1, 9)
    assert hold(held, person, utc(2026, 7, 1, 7)) is None  # the same command again changes nothing
    # resume ends the hold at once, re-applying 06:00 under an id of its own
    again = resume(held, utc(2026, 7, 1, 8), uuid.uuid4())
    assert again is not None and again.transition.instant == utc(2026, 7, 1, 6)
    assert again.command_id != mine.command_id
    resumed = fired(held, again)
    assert resumed.hold_until is None
    # without a resume, the 09:00 transition ends the hold
    nine = due(held, utc(2026, 7, 1, 9))
    assert nine is not None
    assert fired(held, nine).hold_until is None


def test_a_hold_keeps_a_catch_up_from_undoing_a_persons_command() -> None:
    program = (entry("06:00", 21), entry("09:00", 18))
    state = DeviceSchedule(
        device_id="t1", home_id="h", program=program, timezone="UTC", set_at=utc(2026, 7, 1)
    )
    held = hold(state, uuid.uuid4(), utc(2026, 7, 1, 7))  # 06:00 never fired (the scheduler was down)
    assert held is not None
    assert due(held, utc(2026, 7, 1, 7, 30)) is None
    assert due(held, utc(2026, 7, 1, 9)) is not None


def test_upcoming_lists_the_next_transitions_in_order() -> None:
    program = [entry("07:00", 21, days=("mon", "fri")), entry("22:00", 16, days=("mon",))]
    nxt = upcoming(program, BERLIN, utc(2026, 3, 27, 12), 4)  # Friday noon, DST starts Sunday
    assert [t.local.strftime("%a %H:%M %z") for t in nxt] == [
        "Mon 07:00 +0200",
        "Mon 22:00 +0200",
        "Fri 07:00 +0200",
        "Mon 07:00 +0200",
    ]
    assert in_force(program, BERLIN, utc(2026, 3, 27, 12)) is not None


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ([entry("25:00", 20)], "invalid_time"),
        ([entry("7:00", 20)], "invalid_time"),
        ([entry("07:00", 20, days=("monday",))], "unknown_day"),
        ([entry("07:00", 20, days=())], "no_days"),
        ([entry("07:00", 20), entry("07:00", 21, days=("tue",))], "duplicate_time"),
    ],
)
def test_a_program_that_cannot_run_is_refused_with_a_reason(program: list[ProgramEntry], reason: str) -> None:
    with pytest.raises(ScheduleInvalid) as caught:
        check_program(program)
    assert caught.value.reason == reason


@pytest.mark.parametrize("name", ["Mars/Olympus", "../etc/passwd", "", "Europe/Berlin\x00"])
def test_an_unknown_zone_is_refused(name: str) -> None:
    with pytest.raises(ScheduleInvalid) as caught:
        zone(name)
    assert caught.value.reason == "unknown_timezone"


def test_program_entries_round_trip_as_json() -> None:
    program = [entry("06:30", 21)]
    data = msgspec.json.encode(program)
    assert msgspec.json.decode(data, type=list[ProgramEntry]) == program
