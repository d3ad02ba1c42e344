"""The simulated household and its history: routines with jitter, odd days and away weeks, the outdoor
temperature by time zone and season, a room's physics under it, and the messages a history is made of."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from hearth_shared.schema.mqtt import StateMessage, decode_state
from hearth_simulator.devices.sim_thermostat import SimThermostat
from hearth_simulator.history import History, Home, parse_duration
from hearth_simulator.household import Change, Household, Routine
from hearth_simulator.outdoor import Outdoor

pytestmark = pytest.mark.unit

HOUR = 3600.0
DAY = 86_400.0
BERLIN = ZoneInfo("Europe/Berlin")

ROUTINE = Routine(
    weekday=(
        Change(6 * 60 + 30, 21.5),
        Change(8 * 60, 17.5),
        Change(17 * 60 + 30, 21.5),
        Change(22 * 60, 18.0),
    ),
    weekend=(Change(8 * 60 + 30, 21.5), Change(23 * 60, 18.0)),
)


def household(**overrides: object) -> Household:
    params: dict[str, object] = {
        "home_id": "h1",
        "time_zone": "Europe/Berlin",
        "routine": ROUTINE,
        "jitter_min": 5.0,
        "odd_day_share": 0.0,
        "away_week_share": 0.0,
        **overrides,
    }
    return Household(**params)  # type: ignore[arg-type]


def local(t: float, zone: ZoneInfo = BERLIN) -> datetime:
    return datetime.fromtimestamp(t, UTC).astimezone(zone)


def span(first: date, days: int, zone: ZoneInfo = BERLIN) -> tuple[float, float]:
    start = datetime(first.year, first.month, first.day, tzinfo=zone).timestamp()
    return start, start + days * DAY


# ------------------------------------------------------------------------------------------ routine


def test_a_weekday_follows_the_routine_at_local_times_within_the_jitter() -> None:
    start, end = span(date(2026, 11, 2), 5)  # Monday to Friday
    changes = household().changes(start, end)
    assert len(changes) == 5 * 4
    for n, change in enumerate(changes):
        planned = ROUTINE.weekday[n % 4]
        at = local(change.t)
        minutes = at.hour * 60 + at.minute + at.second / 60
        assert abs(minutes - planned.minute) <= 3 * 5.0  # at most three jitters away
        assert change.target_c == planned.target_c


def test_the_weekend_has_its_own_routine() -> None:
    start, end = span(date(2026, 11, 7), 2)  # Saturday, Sunday
    changes = household().changes(start, end)
    assert [c.target_c for c in changes] == [21.5, 18.0, 21.5, 18.0]
    assert all(local(c.t).weekday() >= 5 for c in changes)


def test_jitter_moves_changes_by_a_few_minutes_not_all_the_same() -> None:
    start, end = span(date(2026, 10, 5), 28)
    wakes = [
        local(c.t) for c in household().changes(start, end) if c.target_c == 21.5 and local(c.t).hour < 8
    ]
    offsets = {round(w.hour * 60 + w.minute + w.second / 60 - 390, 1) for w in wakes if w.weekday() < 5}
    assert len(offsets) > 10  # not the same minute every day
    assert max(abs(o) for o in offsets) <= 15.0


def test_the_same_seed_gives_the_same_changes_whatever_the_span() -> None:
    start, end = span(date(2026, 10, 5), 14)
    whole = household(odd_day_share=0.3, away_week_share=0.3).changes(start, end)
    second_week = household(odd_day_share=0.3, away_week_share=0.3).changes(start + 7 * DAY, end)
    assert [c for c in whole if c.t >= start + 7 * DAY] == second_week
    assert household(seed=1).changes(start, end) != household(seed=2).changes(start, end)


def test_the_changes_follow_daylight_saving_time() -> None:
    before, _ = span(date(2026, 10, 23), 1)  # Friday before the clocks go back (25 October)
    after, _ = span(date(2026, 10, 26), 1)  # Monday after
    first_before = household(jitter_min=0.0).changes(before, before + DAY)[0]
    first_after = household(jitter_min=0.0).changes(after, after + DAY)[0]
    assert (local(first_before.t).hour, local(first_after.t).hour) == (6, 6)
    assert datetime.fromtimestamp(first_before.t, UTC).hour == 4  # CEST
    assert datetime.fromtimestamp(first_after.t, UTC).hour == 5  # CET


def test_odd_days_break_the_routine_on_about_their_share_of_days() -> None:
    start, end = span(date(2026, 1, 5), 7 * 20)
    assert household().changes(start, end) != household(odd_day_share=0.2).changes(start, end)
    some = household(odd_day_share=0.2)
    days = [date(2026, 1, 5) + timedelta(days=n) for n in range(7 * 20)]
    odd = [d for d in days if some.day_plan(d) != list(ROUTINE.of(d))]
    assert 0.1 < len(odd) / len(days) < 0.3
    assert all(household().day_plan(d) == list(ROUTINE.of(d)) for d in days)  # no share, no odd day


def test_an_away_week_sets_the_away_target_on_monday_and_comes_home_on_sunday() -> None:
    away = household(away_week_share=1.0, away_c=15.0)
    start, end = span(date(2026, 11, 2), 7)  # a Monday to the Sunday
    changes = away.changes(start, end)
    assert [c.target_c for c in changes] == [15.0, ROUTINE.weekend[0].target_c]
    monday, sunday = (local(c.t) for c in changes)
    assert (monday.weekday(), sunday.weekday(), sunday.hour in (16, 17)) == (0, 6, True)


def test_away_weeks_come_on_about_their_share_of_weeks() -> None:
    some = household(away_week_share=0.25)
    mondays = [date(2025, 1, 6) + timedelta(weeks=n) for n in range(200)]
    share = sum(some.is_away_week(m) for m in mondays) / len(mondays)
    assert 0.15 < share < 0.35


def test_a_drawn_household_is_reproducible_and_plausible() -> None:
    one = Household.for_home("home-7", "America/Chicago", seed=3)
    assert one == Household.for_home("home-7", "America/Chicago", seed=3)
    assert one != Household.for_home("home-8", "America/Chicago", seed=3)
    wake, leave, back, sleep = one.routine.weekday
    assert 6 * 60 <= wake.minute < leave.minute < back.minute < sleep.minute <= 23.5 * 60
    assert wake.target_c > leave.target_c and back.target_c > sleep.target_c


# ------------------------------------------------------------------------------------------ outdoor


def test_the_outdoor_is_coldest_at_four_and_warmest_at_sixteen_local_time() -> None:
    tokyo = Outdoor(time_zone="Asia/Tokyo", mean_c=10.0, day_swing_c=5.0)
    day = datetime(2026, 6, 1, tzinfo=ZoneInfo("Asia/Tokyo"))
    assert tokyo.temperature_c((day + timedelta(hours=4)).timestamp()) == pytest.approx(5.0)
    assert tokyo.temperature_c((day + timedelta(hours=16)).timestamp()) == pytest.approx(15.0)
    new_york = Outdoor(time_zone="America/New_York", mean_c=10.0, day_swing_c=5.0)
    same_moment = (day + timedelta(hours=4)).timestamp()  # 04:00 in Tokyo is 15:00 in New York
    assert new_york.temperature_c(same_moment) > 14.0


def test_the_season_is_coldest_in_january_north_and_in_july_south() -> None:
    north = Outdoor(time_zone="Europe/Berlin", mean_c=10.0, season_swing_c=9.0, day_swing_c=0.0)
    south = Outdoor(time_zone="Australia/Melbourne", mean_c=15.0, season_swing_c=5.0, southern=True)
    south.day_swing_c = 0.0
    january = datetime(2026, 1, 20, 12, tzinfo=UTC).timestamp()
    july = datetime(2026, 7, 21, 12, tzinfo=UTC).timestamp()
    assert north.temperature_c(january) == pytest.approx(1.0, abs=0.1)
    assert north.temperature_c(july) == pytest.approx(19.0, abs=0.1)
    assert south.temperature_c(january) == pytest.approx(20.0, abs=0.1)
    assert south.temperature_c(july) == pytest.approx(10.0, abs=0.1)


def test_each_home_draws_its_own_climate_reproducibly() -> None:
    import random

    one = Outdoor.for_home(random.Random("0/outdoor/a"))
    assert one == Outdoor.for_home(random.Random("0/outdoor/a"))
    ZoneInfo(one.time_zone)  # a real zone
    drawn = {Outdoor.for_home(random.Random(f"0/outdoor/{n}")).mean_c for n in range(20)}
    assert len(drawn) == 20


# ------------------------------------------------------------------------------------------ physics


def test_a_heating_room_warms_at_the_heater_minus_its_loss_to_the_outdoor() -> None:
    still = Outdoor(mean_c=5.0, day_swing_c=0.0)
    model = SimThermostat(
        rate=1 / 900, ambient_c=15.0, target_c=25.0, insulation_h=10.0, heat_c_per_h=4.0, outdoor=still
    )
    model.step(HOUR)
    expected_rate = 4.0 - (15.0 - 5.0) / 10.0  # about 3 °C/h at the start
    assert model.hvac_action == "heating"
    assert 15.0 + 0.9 * expected_rate < model.ambient < 15.0 + expected_rate


def test_an_idle_room_cools_toward_the_outdoor() -> None:
    still = Outdoor(mean_c=5.0, day_swing_c=0.0)
    model = SimThermostat(rate=1 / 900, ambient_c=20.0, target_c=10.0, insulation_h=10.0, outdoor=still)
    model.step(HOUR)
    assert model.hvac_action == "idle"
    assert 20.0 - 1.5 < model.ambient < 20.0 - 1.3  # (20 - 5) / 10 = 1.5 °C/h at the start, slowing


def test_a_change_on_the_panel_is_reported_at_once_with_one_more_panel_change() -> None:
    model = SimThermostat(rate=1 / 900, ambient_c=20.0, target_c=20.0)
    model.step(900.0)  # the whole state once
    model.set_on_panel(22.0, 1000.0)
    report = model.step(1000.0)
    assert report is not None
    assert report["target_c"] == 22.0 and report["panel_changes"] == 1
    assert model.state["outdoor_c"] == round(model.outside_c(1000.0), 1)
    assert model.state["time_zone"] == "UTC"


# ------------------------------------------------------------------------------------------ history


def test_parse_duration() -> None:
    assert parse_duration("6w") == 6 * 7 * DAY
    assert parse_duration("2d") == 2 * DAY
    assert parse_duration("90") == 90.0
    with pytest.raises(ValueError, match="positive"):
        parse_duration("-1d")


def test_a_history_reports_every_manual_change_at_its_device_time_in_order() -> None:
    end = datetime(2026, 11, 27, 9, tzinfo=UTC).timestamp()
    start = end - 3 * DAY
    homes = [Home("h-a", ("h-a-thermostat-1", "h-a-thermostat-2")), Home("h-b", ("h-b-thermostat-1",))]
    history = History(homes, start, end, seq_base=10**13, seed=5)
    by_device: dict[str, list[StateMessage]] = {}
    for records in history.slices():
        for topic, payload in records:
            by_device.setdefault(topic.split("/")[2], []).append(decode_state(payload))
    assert set(by_device) == {"h-a-thermostat-1", "h-a-thermostat-2", "h-b-thermostat-1"}
    for device_id, messages in by_device.items():
        seqs = [m.seq for m in messages]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and seqs[0] > 10**13
        times = [m.at.timestamp() for m in messages]
        assert times == sorted(times) and start < times[0] and times[-1] == end
        assert "ambient_c" in messages[-1].state  # the whole state at the end
        manual, count = [], 0
        for message in messages:
            if message.state.get("panel_changes", count) != count:  # the count moved: a manual change
                count = message.state["panel_changes"]
                manual.append((round(message.at.timestamp()), message.state["target_c"]))
        planned = [(round(c.t), c.target_c) for c in history.manual_changes[device_id]]
        assert len(planned) >= 6  # three days of a routine
        assert manual == planned
        assert len([m for m in messages if "outdoor_c" in m.state]) >= 3 * 24 * 4 - 1  # every 15 minutes
        assert {"heating", "idle"} <= {m.state.get("hvac_action") for m in messages}


def test_a_history_is_the_same_for_the_same_seed() -> None:
    end = datetime(2026, 11, 27, tzinfo=UTC).timestamp()
    homes = [Home("h", ("h-thermostat-1",))]

    def messages(seed: int) -> list[bytes]:
        history = History(homes, end - DAY, end, seq_base=1, seed=seed)
        return [payload for records in history.slices() for _, payload in records]

    assert messages(1) == messages(1)
    assert messages(1) != messages(2)
