"""The program learner on synthetic change lists: a household's routine, with jitter, comes back as its
program (times to 5 minutes, targets to 0.5 °C); odd days and an away week do not move it; a habit seen
in a minority of weeks, or fewer than two weeks of changes, give no entry; the evidence counts."""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from hearth_shared.domain.program_learning import WEEKDAYS, WEEKEND, ManualChange, suggest_program
from hearth_shared.domain.schedule import check_program

pytestmark = pytest.mark.unit

ZONE = "Europe/Berlin"
MONDAY = date(2026, 1, 5)  # six weeks from here, no DST change in them
WEEKDAY_ROUTINE = (("06:30", 21.5), ("08:15", 17.5), ("17:45", 21.5), ("22:30", 17.0))
WEEKEND_ROUTINE = (("08:30", 21.5), ("23:00", 17.0))


def _minutes(hhmm: str) -> int:
    return int(hhmm[:2]) * 60 + int(hhmm[3:])


def _change(day: date, minute: float, target: float) -> ManualChange:
    wall = datetime.combine(day, datetime.min.time()) + timedelta(minutes=minute)
    return ManualChange(wall.replace(tzinfo=ZoneInfo(ZONE)), target)


def household(
    weeks: int = 6, *, odd_days: dict[date, str] | None = None, away_week: int | None = None, seed: int = 1
) -> list[ManualChange]:
    """Every day's routine with 2-8 minutes' jitter; an odd day is ``late`` (all 90 minutes late) or
    ``other`` (the other day type's routine); an away week sets 15 °C at Monday's first change and comes
    home at 17:00 on Sunday."""
    rng = random.Random(seed)
    odd_days = odd_days or {}
    changes = []
    for n in range(weeks * 7):
        day = MONDAY + timedelta(days=n)
        weekend = day.weekday() >= 5
        routine = WEEKEND_ROUTINE if weekend else WEEKDAY_ROUTINE
        odd = odd_days.get(day)
        if odd == "other":
            routine = WEEKDAY_ROUTINE if weekend else WEEKEND_ROUTINE
        late = 90 if odd == "late" else 0
        if away_week is not None and n // 7 == away_week:
            if day.weekday() == 0:
                changes.append(_change(day, _minutes(routine[0][0]) + rng.gauss(0, 4), 15.0))
            elif day.weekday() == 6:
                changes.append(_change(day, 17 * 60 + rng.gauss(0, 4), 21.5))
            continue
        for hhmm, target in routine:
            changes.append(_change(day, _minutes(hhmm) + late + max(-8, min(8, rng.gauss(0, 4))), target))
    return changes


def as_rows(program: object) -> list[tuple[tuple[str, ...], str, float]]:
    return [(e.days, e.at, e.command.params["target_c"]) for e in program]  # type: ignore[attr-defined]


def is_the_routine(program: object) -> bool:
    """Every habit of the routine, and nothing else: its day type and target, its time to within 5
    minutes (a median of a few dozen jittered changes, rounded to 5 minutes)."""
    rows = as_rows(program)
    return len(rows) == len(EXPECTED) and all(
        (days, target) == (want_days, want_target) and abs(_minutes(at) - _minutes(want_at)) <= 5
        for (days, at, target), (want_days, want_at, want_target) in zip(rows, EXPECTED, strict=True)
    )


EXPECTED = [
    *((WEEKDAYS, at, target) for at, target in WEEKDAY_ROUTINE),
    *((WEEKEND, at, target) for at, target in WEEKEND_ROUTINE),
]


def test_a_routine_with_jitter_comes_back_as_its_program() -> None:
    found = suggest_program(household(), ZONE)
    assert found is not None
    assert is_the_routine(found.program), as_rows(found.program)
    check_program(list(found.program))  # runnable as it is
    assert found.evidence.weeks == 6
    assert found.evidence.changes == 6 * (5 * 4 + 2 * 2)
    assert found.evidence.regularity == 1.0
    assert all(e.weeks_seen == 6 and e.regularity == 1.0 and e.spread_min <= 8 for e in found.entries)
    assert all(e.command.name == "set_target_temperature" for e in found.program)


def test_odd_days_and_an_away_week_do_not_move_the_program() -> None:
    odd = {
        MONDAY + timedelta(days=2): "late",  # a Wednesday, everything 90 minutes late
        MONDAY + timedelta(days=8): "other",  # a Tuesday like a Sunday
        MONDAY + timedelta(days=19): "other",  # a Saturday like a weekday
        MONDAY + timedelta(days=30): "late",  # a Thursday
    }
    found = suggest_program(household(odd_days=odd, away_week=3), ZONE)
    assert found is not None
    assert is_the_routine(found.program), as_rows(found.program)
    assert found.evidence.weeks == 6
    assert found.evidence.regularity < 1.0  # the odd changes are not explained by the program
    assert min(e.weeks_seen for e in found.entries) == 5  # the away week is missing from each habit


def test_a_habit_of_a_minority_of_weeks_or_of_days_is_left_out() -> None:
    changes = household()

    def evenings(days: list[int]) -> list[ManualChange]:
        return [_change(MONDAY + timedelta(days=d), 19 * 60 + 30, 23.0) for d in days]

    fridays = [4 + 7 * w for w in range(6)]
    weekdays_of_weeks = [d + 7 * w for w in range(6) for d in range(5)]
    for extra, kept in (
        (evenings(fridays[:2]), False),  # two weeks of six
        (evenings(fridays[:4]), False),  # most weeks, but only on Fridays: a minority of the weekdays
        (evenings([d for d in weekdays_of_weeks if d < 14]), False),  # every weekday of two weeks
        (evenings([d for d in weekdays_of_weeks if d >= 14]), True),  # every weekday of four weeks
    ):
        found = suggest_program([*changes, *extra], ZONE)
        assert found is not None
        assert ((WEEKDAYS, "19:30", 23.0) in as_rows(found.program)) is kept
        assert is_the_routine([e for e in found.program if e.at != "19:30"]), as_rows(found.program)


def test_too_little_history_suggests_nothing() -> None:
    assert suggest_program([], ZONE) is None
    assert suggest_program(household(weeks=1), ZONE) is None
    assert suggest_program(household(weeks=2), ZONE) is not None


def test_times_are_read_in_the_devices_zone() -> None:
    """The same instants read in another zone are other wall-clock times."""
    found = suggest_program(household(), "UTC")
    assert found is not None
    assert found.evidence.timezone == "UTC"
    days, at, target = as_rows(found.program)[0]  # 06:30 in Berlin in winter
    assert (days, target) == (WEEKDAYS, 21.5) and abs(_minutes(at) - _minutes("05:30")) <= 5
