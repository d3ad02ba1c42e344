"""The runtime report's day figures for one thermostat (``hearth_analytics.rules.runtime_days``), worked out
by hand: a heating stretch across the home's midnight is split there, a DST day has 23 or 25 hours of
runtime and degree-days, a silence longer than an hour counts nothing, manual changes are the
``panel_changes`` increments on the home's date, holds come from the home journal, and away is a target
left below the base for a day."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hearth_analytics.rules.runtime_days import (
    HoldsAndZones,
    Sample,
    Span,
    day_pieces,
    runtime_days,
    zone_named,
)
from hearth_shared.domain.home_facts import (
    HoldPayload,
    HomeTimezoneSet,
    ScheduleHoldStarted,
    ScheduleResumed,
    TimezonePayload,
)
from hearth_shared.schema.runtime_records import RuntimeFigures

pytestmark = pytest.mark.unit

BERLIN = zone_named("Europe/Berlin")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def every(start: str, end: str, step_min: int = 30, **keys: Any) -> list[Sample]:
    """A report every ``step_min`` from ``start`` up to ``end`` (UTC, included), each with ``keys``."""
    t, last = utc(start), utc(end)
    found: list[Sample] = []
    while t <= last:
        found.append(Sample(at=t, **keys))
        t += timedelta(minutes=step_min)
    return found


def by_day(days: list[RuntimeFigures]) -> dict[str, RuntimeFigures]:
    return {d.day: d for d in days}


def test_a_heating_stretch_across_the_homes_midnight_is_split_at_local_midnight_not_utc() -> None:
    # Berlin is UTC+1 in November: local midnight of the 21st is 23:00 UTC on the 20th.
    samples = [
        Sample(at=utc("2026-11-20T21:30"), hvac_action="idle"),
        Sample(at=utc("2026-11-20T22:00"), hvac_action="heating"),  # 23:00 local
        Sample(at=utc("2026-11-20T22:45")),
        Sample(at=utc("2026-11-20T23:30")),
        Sample(at=utc("2026-11-21T00:00"), hvac_action="idle"),  # 01:00 local
    ]

    days = by_day(runtime_days(samples, BERLIN, until=utc("2026-11-21T00:00")))

    assert list(days) == ["2026-11-20", "2026-11-21"]
    assert days["2026-11-20"].heating_min == 60.0 and days["2026-11-20"].covered_min == 90.0
    assert days["2026-11-21"].heating_min == 60.0 and days["2026-11-21"].covered_min == 60.0
    assert days["2026-11-21"].day_start == "2026-11-21T00:00:00+01:00"
    assert days["2026-11-21"].day_end == "2026-11-22T00:00:00+01:00"
    assert days["2026-11-21"].time_zone == "Europe/Berlin"
    in_utc = by_day(runtime_days(samples, zone_named("UTC"), until=utc("2026-11-21T00:00")))
    assert in_utc["2026-11-20"].heating_min == 120.0 and "2026-11-21" not in in_utc


@pytest.mark.parametrize(
    ("day", "hours", "day_start", "day_end"),
    [
        ("2026-03-29", 23, "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00"),  # spring forward
        ("2026-10-25", 25, "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00"),  # fall back
    ],
)
def test_a_dst_day_in_the_homes_zone_has_its_own_length(
    day: str, hours: int, day_start: str, day_end: str
) -> None:
    start, end = datetime.fromisoformat(day_start), datetime.fromisoformat(day_end)
    first, last = start - timedelta(hours=2), end + timedelta(hours=2)
    samples = every(first.astimezone(UTC).isoformat()[:16], last.astimezone(UTC).isoformat()[:16],
                    hvac_action="heating", outdoor_c=8.0)  # fmt: skip

    found = by_day(runtime_days(samples, BERLIN, until=last))[day]

    assert found.covered_min == found.heating_min == hours * 60
    assert found.hdd == pytest.approx(10.0 * hours / 24, abs=1e-4)  # 10 degrees below the base, for `hours`
    assert found.outdoor_mean_c == 8.0
    assert found.heating_min_per_hdd == pytest.approx(hours * 60 / (10.0 * hours / 24), abs=1e-3)
    assert (found.day_start, found.day_end) == (day_start, day_end)


def test_a_silence_longer_than_an_hour_is_a_gap_that_counts_nothing() -> None:
    samples = [
        Sample(at=utc("2026-11-20T10:00"), hvac_action="heating", outdoor_c=6.0),
        Sample(at=utc("2026-11-20T14:00"), hvac_action="idle"),  # four hours later
        Sample(at=utc("2026-11-20T14:30")),
    ]

    (day,) = runtime_days(samples, zone_named("UTC"), until=utc("2026-11-20T14:50"))

    assert day.heating_min == 60.0  # 10:00-11:00; nothing is known from 11:00 to 14:00
    assert day.covered_min == 60.0 + 30.0 + 20.0  # and the last report holds until the batch's time
    assert day.hdd == pytest.approx(12.0 * 110 / 1440, abs=1e-4)  # 12 degrees below 18 for 110 minutes
    assert day.heating_min_per_hdd == pytest.approx(60.0 / (12.0 * 110 / 1440), abs=1e-3)
    assert day.outdoor_mean_c == 6.0


def test_the_last_report_holds_until_the_batchs_time_for_an_hour_at_most() -> None:
    samples = [Sample(at=utc("2026-11-20T10:00"), hvac_action="heating")]

    assert runtime_days(samples, zone_named("UTC"), until=utc("2026-11-20T10:20"))[0].heating_min == 20.0
    assert runtime_days(samples, zone_named("UTC"), until=utc("2026-11-20T15:00"))[0].heating_min == 60.0
    assert runtime_days(samples, zone_named("UTC")) == []  # no batch time: it ends at the report


def test_a_mild_day_or_one_without_an_outdoor_value_has_no_ratio() -> None:
    mild = every("2026-11-20T00:00", "2026-11-20T23:30", hvac_action="heating", outdoor_c=17.0)
    (day,) = runtime_days(mild, zone_named("UTC"), until=utc("2026-11-21T00:00"))
    assert day.hdd == pytest.approx(1.0 / 1.0, abs=1e-4) and day.heating_min_per_hdd == 1440.0
    milder = every("2026-11-20T00:00", "2026-11-20T23:30", hvac_action="heating", outdoor_c=17.6)
    (day,) = runtime_days(milder, zone_named("UTC"), until=utc("2026-11-21T00:00"))
    assert day.hdd == pytest.approx(0.4, abs=1e-4) and day.heating_min_per_hdd is None
    indoor_only = every("2026-11-20T00:00", "2026-11-20T23:30", hvac_action="heating")
    (day,) = runtime_days(indoor_only, zone_named("UTC"), until=utc("2026-11-21T00:00"))
    assert (day.hdd, day.heating_min_per_hdd, day.outdoor_mean_c) == (None, None, None)


def test_manual_changes_are_panel_changes_increments_on_the_homes_date() -> None:
    samples = [
        Sample(at=utc("2026-11-20T06:00"), panel_changes=3),  # the first report's count is no change
        Sample(at=utc("2026-11-20T06:30"), panel_changes=4, target_c=21.0),
        Sample(at=utc("2026-11-20T07:00"), panel_changes=4),
        Sample(at=utc("2026-11-20T22:30"), panel_changes=6, target_c=17.0),  # 23:30 local: two folded in one
        Sample(at=utc("2026-11-20T23:15"), panel_changes=7, target_c=16.5),  # 00:15 local, the 21st
        Sample(at=utc("2026-11-20T23:20"), panel_changes=0),  # a reset device counts from there
    ]

    days = by_day(runtime_days(samples, BERLIN, until=utc("2026-11-20T23:30")))

    assert days["2026-11-20"].manual_changes == 3
    assert days["2026-11-21"].manual_changes == 1


def _started(at: str, until: str) -> ScheduleHoldStarted:
    payload = HoldPayload(command_id=uuid.uuid4(), hold_until=utc(until))
    return ScheduleHoldStarted(fact_id=uuid.uuid4(), home_id="h1", device_id="t1", occurred_at=utc(at),
                               recorded_at=utc(at), payload=payload)  # fmt: skip


def _resumed(at: str) -> ScheduleResumed:
    return ScheduleResumed(fact_id=uuid.uuid4(), home_id="h1", device_id="t1", occurred_at=utc(at),
                           recorded_at=utc(at))  # fmt: skip


def test_holds_come_from_the_home_journal_and_end_at_hold_until_a_resume_or_the_next_hold() -> None:
    zone_set = HomeTimezoneSet(fact_id=uuid.uuid4(), home_id="h1", occurred_at=utc("2026-11-19T00:00"),
                               recorded_at=utc("2026-11-19T00:00"),
                               payload=TimezonePayload(timezone="Europe/Berlin"))  # fmt: skip
    spans = HoldsAndZones()
    for fact in [
        zone_set,
        _started("2026-11-20T20:00", until="2026-11-21T05:00"),  # 21:00 local -> 06:00 local the next day
        _started("2026-11-21T09:00", until="2026-11-21T17:00"),  # 10:00 local, resumed at 11:30 local
        _resumed("2026-11-21T10:30"),
        _started("2026-11-21T19:00", until="2026-11-22T05:00"),  # 20:00 local, replaced at 21:00 local
        _started("2026-11-21T20:00", until="2026-11-22T05:00"),  # still open: ends at hold_until
    ]:
        spans.apply(fact)

    assert spans.zones == {"h1": "Europe/Berlin"}
    holds = spans.holds()["t1"]
    assert holds == [
        Span(utc("2026-11-20T20:00"), utc("2026-11-21T05:00")),
        Span(utc("2026-11-21T09:00"), utc("2026-11-21T10:30")),
        Span(utc("2026-11-21T19:00"), utc("2026-11-21T20:00")),
        Span(utc("2026-11-21T20:00"), utc("2026-11-22T05:00")),
    ]
    days = by_day(runtime_days([], BERLIN, holds, until=utc("2026-11-22T03:00")))
    assert (days["2026-11-20"].holds, days["2026-11-20"].hold_min) == (1, 180.0)  # 21:00-24:00 local
    assert (days["2026-11-21"].holds, days["2026-11-21"].hold_min) == (3, 360.0 + 90.0 + 60.0 + 180.0)
    assert (days["2026-11-22"].holds, days["2026-11-22"].hold_min) == (0, 240.0)  # until the batch's time
    assert days["2026-11-21"].covered_min == 0.0  # no reports: a hold is the schedule's, not a reading


def test_away_is_a_target_left_below_the_base_for_a_day_or_more() -> None:
    reports = every("2026-11-16T00:00", "2026-11-23T23:30", step_min=60)  # covered all week, UTC home
    targets = {
        "2026-11-16T06:30": 20.5,  # Monday: comfort for 1.5 hours
        "2026-11-16T08:00": 15.0,  # away from Monday 08:00 ...
        "2026-11-22T17:00": 21.0,  # ... to Sunday 17:00
        "2026-11-22T23:00": 17.0,  # a night's setback, 7 hours: not away
        "2026-11-23T06:00": 21.0,
    }
    changes = [Sample(at=utc(at), target_c=c) for at, c in targets.items()]
    samples = sorted([*reports, *changes], key=lambda s: s.at)

    days = by_day(runtime_days(samples, zone_named("UTC"), until=utc("2026-11-24T00:00")))

    assert days["2026-11-16"].away_min == 16 * 60.0
    assert all(days[f"2026-11-{d}"].away_min == 1440.0 for d in range(17, 22))
    assert days["2026-11-22"].away_min == 17 * 60.0
    assert days["2026-11-23"].away_min == 0.0


def test_an_unknown_zone_is_utc_and_day_pieces_cover_the_span() -> None:
    assert zone_named("Mars/Olympus_Mons").key == "UTC" and zone_named(None).key == "UTC"
    pieces = list(day_pieces(utc("2026-03-28T20:00"), utc("2026-03-30T01:00"), BERLIN))
    assert [(d.isoformat(), length / timedelta(hours=1)) for d, length in pieces] == [
        ("2026-03-28", 3.0), ("2026-03-29", 23.0), ("2026-03-30", 3.0),
    ]  # fmt: skip
