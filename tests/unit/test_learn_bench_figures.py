"""The pure figures of ``hearth bench learn`` (hearth_bench.figures.learn_figures): when a manual change is
made unnecessary by a program, and MissTime and heating replayed on a room whose physics is known."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from hearth_bench.figures.learn_figures import (
    ProgramTimeline,
    Replayed,
    RoomFigures,
    RoomPhysics,
    Span,
    own_program,
    replay,
    summarize,
)
from hearth_shared.domain.program_learning import COMMAND
from hearth_shared.domain.room_response import ResponseFit, RoomResponse
from hearth_shared.domain.schedule import DAYS, ProgramEntry, ScheduledCommand
from hearth_simulator.household import Household, ManualChange
from hearth_simulator.outdoor import Outdoor

pytestmark = pytest.mark.unit

MONDAY = datetime(2026, 1, 5, tzinfo=UTC).timestamp()
DAY_S = 86_400.0
TWO_WEEKS = Span(MONDAY, MONDAY + 14 * DAY_S)


def daily(*entries: tuple[str, float]) -> tuple[ProgramEntry, ...]:
    return tuple(
        ProgramEntry(days=DAYS, at=at, command=ScheduledCommand(name=COMMAND, params={"target_c": target}))
        for at, target in entries
    )


def at(day: int, hh_mm: str) -> float:
    hours, minutes = hh_mm.split(":")
    return MONDAY + day * DAY_S + int(hours) * 3600 + int(minutes) * 60


def test_a_household_whose_program_is_exactly_its_habits_makes_every_change_unnecessary() -> None:
    drawn = Household.for_home("home-1", "Europe/Berlin", seed=3)
    steady = dataclasses.replace(drawn, jitter_min=0.0, odd_day_share=0.0, away_week_share=0.0)
    changes = steady.changes(TWO_WEEKS.start, TWO_WEEKS.end)
    timeline = ProgramTimeline.of(own_program(steady.routine, 0.0), steady.time_zone, TWO_WEEKS)
    assert len(changes) == 10 * 4 + 4 * 2  # two weeks: four changes a weekday, two a weekend day
    assert timeline.share_unnecessary(changes) == 1.0


def test_a_change_is_unnecessary_within_30_minutes_and_half_a_degree_of_the_programs_target() -> None:
    timeline = ProgramTimeline.of(daily(("07:00", 21.0), ("22:00", 17.0)), "UTC", TWO_WEEKS)
    unnecessary = [
        ManualChange(at(2, "07:25"), 21.0),  # the program sets it 25 minutes before
        ManualChange(at(2, "06:35"), 21.5),  # ... 25 minutes after, half a degree off
        ManualChange(at(2, "12:00"), 21.0),  # ... and has it in force all along
        ManualChange(at(2, "22:29"), 17.0),
    ]
    necessary = [
        ManualChange(at(2, "06:20"), 21.0),  # 40 minutes early: the room is at 17 then
        ManualChange(at(2, "12:00"), 23.0),  # a target the program never sets
        ManualChange(at(2, "07:10"), 18.0),  # at a transition's time, to another target
    ]
    assert all(timeline.made_unnecessary(c) for c in unnecessary)
    assert not any(timeline.made_unnecessary(c) for c in necessary)
    assert timeline.share_unnecessary([*unnecessary, *necessary]) == pytest.approx(4 / 7)


def known_room(heat_c_per_h: float, outdoor_c: float) -> tuple[RoomPhysics, RoomResponse]:
    """A room (insulation time constant 8 h) and a response fitted to it exactly."""
    outdoor = Outdoor(time_zone="UTC", mean_c=outdoor_c, season_swing_c=0.0, day_swing_c=0.0)
    physics = RoomPhysics(insulation_h=8.0, heat_c_per_h=heat_c_per_h, outdoor=outdoor)
    known = ResponseFit(base_c_per_h=heat_c_per_h, per_degree_per_h=-1 / 8.0, samples=500, rmse_c_per_h=0.0)
    fitted = RoomResponse(
        heating=known,
        fitted_from=datetime(2025, 12, 1, tzinfo=UTC),
        fitted_to=datetime(2026, 1, 1, tzinfo=UTC),
    )
    return physics, fitted


def test_preheat_on_a_room_that_heats_at_a_known_rate_has_no_misstime() -> None:
    physics, response = known_room(4.0, 5.0)
    timeline = ProgramTimeline.of(daily(("07:00", 21.0), ("22:00", 17.0)), "UTC", TWO_WEEKS)

    on_time = replay(physics, TWO_WEEKS, 17.0, timeline, [])
    preheated = replay(physics, TWO_WEEKS, 17.0, timeline, [], response)

    assert on_time.comfort_periods == preheated.comfort_periods == 14  # every morning
    assert on_time.miss_s > 14 * 3600  # 17 -> 20.5 °C at 2.5-2.1 °C/h: over an hour each morning
    assert preheated.preheats == 14 and preheated.preheats_capped == 0
    assert preheated.miss_s == 0.0
    assert on_time.unreached_s == 0.0  # late, but every morning the room got there
    assert preheated.heating_s > on_time.heating_s  # heating earlier, in a room that then loses more


def test_a_room_needing_more_than_the_cap_is_late_by_the_difference_and_a_longer_cap_lets_it_arrive() -> None:
    physics, response = known_room(3.0, 0.0)  # levels off at 24 °C
    timeline = ProgramTimeline.of(daily(("07:00", 21.0), ("22:00", 17.0)), "UTC", TWO_WEEKS)

    at_three = replay(physics, TWO_WEEKS, 17.0, timeline, [], response, cap_s=3 * 3600)  # 17->20.5 °C: 5.5 h
    at_eight = replay(physics, TWO_WEEKS, 17.0, timeline, [], response, cap_s=8 * 3600)

    assert at_three.preheats == at_three.preheats_capped == 14
    assert 14 * 2.5 * 3600 < at_three.miss_s < 14 * 3.5 * 3600  # 2.5 h late and more each morning
    assert at_eight.preheats == 14 and at_eight.preheats_capped == 0
    assert at_eight.miss_s == 0.0
    assert at_eight.heating_s > at_three.heating_s


def test_a_manual_change_left_by_the_program_holds_until_its_next_transition() -> None:
    outdoor = Outdoor(time_zone="UTC", mean_c=0.0, season_swing_c=0.0, day_swing_c=0.0)
    physics = RoomPhysics(insulation_h=6.0, heat_c_per_h=5.0, outdoor=outdoor)
    two_days = Span(MONDAY, MONDAY + 2 * DAY_S)
    timeline = ProgramTimeline.of(daily(("07:00", 21.0), ("22:00", 17.0)), "UTC", two_days)
    away = [ManualChange(at(0, "10:00"), 12.0)]  # out for the day: 12 °C until the program's 22:00

    kept = replay(physics, two_days, 17.0, timeline, [])
    left = replay(physics, two_days, 17.0, timeline, away)

    assert left.heating_s < kept.heating_s - 2 * 3600  # 12 °C, not 21 °C, from 10:00 to 22:00
    # 22:00 ends the hold: raising 12 to 17 °C it starts a comfort period of its own, 12 -> 16.5 °C at
    # 5 - T/6 °C/h (6 ln(3 / 2.25) h, 104 minutes); Tuesday morning then misses what it does without the
    # change (give or take the 16.5-17 °C cycle at 07:00: 14 minutes at most)
    assert (kept.comfort_periods, left.comfort_periods) == (2, 3)
    assert abs(left.miss_s - kept.miss_s - 104 * 60) < 20 * 60


def test_the_figures_sum_the_rooms_and_judge_against_the_household_own_program() -> None:
    def room(unnecessary: int, miss_s: float, preheated_miss_s: float, heating_s: float) -> RoomFigures:
        return RoomFigures(
            device_id="t",
            changes=10,
            unnecessary_suggested=unnecessary,
            unnecessary_own=10,
            suggested=True,
            fitted=True,
            own=Replayed(heating_s=3600.0),
            programmed=Replayed(miss_s=miss_s),
            preheated=Replayed(miss_s=preheated_miss_s, heating_s=heating_s),
        )

    figures = summarize([room(7, 600.0, 60.0, 3600.0), room(5, 600.0, 0.0, 3960.0)])
    assert figures.unnecessary_share == pytest.approx(0.6)
    assert figures.unnecessary_share_own == 1.0
    assert figures.miss_cut == pytest.approx(1 - 1 / 20)
    assert figures.heating_ratio == pytest.approx(1.05)
