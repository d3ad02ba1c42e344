"""The runtime report's rules for one thermostat: its reports, in order, and its schedule's holds -> one
figure set per day of the home's calendar. Pure (no Spark, no I/O): ``runtime_report`` runs it per
device inside Spark, the unit tests call it directly (tests/unit/test_runtime_days.py).

What each figure means is written once, in ``hearth_shared.schema.runtime_records``. How they are made:

* A report (``Sample``) carries only the keys that changed; the thermostat's state is carried forward.
  Each report opens a stretch until the next report, cut at ``MAX_SILENCE_MIN`` (a silence beyond it is
  a gap: no runtime, no degree-days). The last report's stretch ends there too, or at ``until`` (the
  batch's time) if that is sooner.
* Every stretch, hold and away period is split at the home's local midnights (``day_pieces``), with the
  zone's daylight-saving rules: the day of an instant is its date in the home's zone, never UTC.
* Ties in time are taken in the order given (the caller sorts by device time, then journal version).
* Holds come from the home journal (``HoldsAndZones``): from ``schedule.hold_started`` until its
  ``hold_until``, or until the device's schedule is resumed or set again, or another hold starts.
  A hold counts whether or not the device reported meanwhile (it is the schedule's, not a reading).
* Away: the reported ``target_c`` unchanged for ``AWAY_AFTER_H`` hours or more, below the degree-day base.
  The last target stretch ends where the device's last report's stretch ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hearth_shared.domain.home_facts import (
    HomeFact,
    HomeTimezoneSet,
    ScheduleHoldStarted,
    ScheduleResumed,
    ScheduleSet,
)
from hearth_shared.schema.runtime_records import (
    AWAY_AFTER_H,
    HDD_BASE_C,
    MAX_SILENCE_MIN,
    MIN_HDD_FOR_RATIO,
    RuntimeFigures,
)

MAX_SILENCE = timedelta(minutes=MAX_SILENCE_MIN)
AWAY_AFTER = timedelta(hours=AWAY_AFTER_H)
MINUTE = timedelta(minutes=1)
HEATING, COOLING = "heating", "cooling"


@dataclass(frozen=True, slots=True)
class Sample:
    """One state report of a thermostat: its device time (aware) and the keys the report carried."""

    at: datetime
    hvac_action: str | None = None
    outdoor_c: float | None = None
    target_c: float | None = None
    panel_changes: int | None = None


class Span(NamedTuple):
    """``[start, end)``, aware instants (a tuple: Spark pickles them to its Python workers)."""

    start: datetime
    end: datetime


def zone_named(name: str | None) -> ZoneInfo:
    """The IANA zone of that name; UTC for none or a name the zone database does not know."""
    try:
        return ZoneInfo(name) if name else ZoneInfo("UTC")
    except (ZoneInfoNotFoundError, ValueError, OSError):  # a device may report any text
        return ZoneInfo("UTC")


def day_start(day: date, zone: ZoneInfo) -> datetime:
    """The day's first instant in the zone, in UTC (a midnight a DST change skips is read with the offset
    before the change, which is the first instant of that day; a repeated one is its first time)."""
    return datetime.combine(day, time(), zone).astimezone(UTC)


def day_pieces(start: datetime, end: datetime, zone: ZoneInfo) -> Iterator[tuple[date, timedelta]]:
    """``[start, end)`` cut at the zone's midnights: (local date, how long of it) for each day it touches."""
    while start < end:
        day = start.astimezone(zone).date()
        piece_end = min(end, day_start(day + timedelta(days=1), zone))
        yield day, piece_end - start
        start = piece_end


def per_hdd(minutes: float, hdd: float | None) -> float | None:
    """Minutes per degree-day, or None on a day too mild (or without an outdoor value) to say."""
    return round(minutes / hdd, 3) if hdd is not None and hdd >= MIN_HDD_FOR_RATIO else None


@dataclass(slots=True)
class DayTally:
    """A day's sums while they are being made; ``figures`` rounds them into ``RuntimeFigures``."""

    covered: timedelta = timedelta()
    heating: timedelta = timedelta()
    cooling: timedelta = timedelta()
    degree_minutes: float = 0.0  # (18 - outdoor)+ x minutes, over covered minutes with an outdoor value
    outdoor_minutes: float = 0.0
    outdoor_sum: float = 0.0  # outdoor x minutes
    manual_changes: int = 0
    holds: int = 0
    held: timedelta = timedelta()
    away: timedelta = timedelta()

    def figures(self, day: date, zone: ZoneInfo) -> RuntimeFigures:
        hdd = self.degree_minutes / (24 * 60) if self.outdoor_minutes else None
        heating_min = self.heating / MINUTE
        return RuntimeFigures(
            day=day.isoformat(),
            time_zone=str(zone.key),
            day_start=day_start(day, zone).astimezone(zone).isoformat(),
            day_end=day_start(day + timedelta(days=1), zone).astimezone(zone).isoformat(),
            covered_min=round(self.covered / MINUTE, 3),
            heating_min=round(heating_min, 3),
            cooling_min=round(self.cooling / MINUTE, 3),
            hdd=None if hdd is None else round(hdd, 4),
            heating_min_per_hdd=per_hdd(heating_min, hdd),
            outdoor_mean_c=round(self.outdoor_sum / self.outdoor_minutes, 3)
            if self.outdoor_minutes
            else None,
            manual_changes=self.manual_changes,
            holds=self.holds,
            hold_min=round(self.held / MINUTE, 3),
            away_min=round(self.away / MINUTE, 3),
        )


@dataclass(slots=True)
class _Carried:
    """The thermostat's state carried from report to report."""

    action: str | None = None
    outdoor: float | None = None
    target: float | None = None
    panel_changes: int | None = None
    targets: list[tuple[datetime, float]] = field(default_factory=list)  # each change of target_c


def runtime_days(
    samples: Sequence[Sample],
    zone: ZoneInfo,
    holds: Sequence[Span] = (),
    until: datetime | None = None,
) -> list[RuntimeFigures]:
    """A thermostat's figures per local day, oldest first: every day a report's stretch, a manual
    change, a hold or an away period touches. ``samples`` in order; ``holds`` sorted by start."""
    days: dict[date, DayTally] = {}

    def tally(day: date) -> DayTally:
        return days.setdefault(day, DayTally())

    state = _Carried()
    covered_end: datetime | None = None
    for i, sample in enumerate(samples):
        _take(state, sample, tally, zone)
        end = sample.at + MAX_SILENCE
        if i + 1 < len(samples):
            end = min(end, samples[i + 1].at)
        elif until is not None:
            end = min(end, max(until, sample.at))
        else:
            end = sample.at
        covered_end = end
        for day, length in day_pieces(sample.at, end, zone):
            _count_stretch(tally(day), state, length)
    for start, end in _away_spans(state.targets, covered_end):
        for day, length in day_pieces(start, end, zone):
            tally(day).away += length
    for hold in holds:
        if until is not None and hold.start >= until:
            continue  # not begun at the batch's time
        tally(hold.start.astimezone(zone).date()).holds += 1
        end = hold.end if until is None else min(hold.end, until)  # not beyond the batch's time
        for day, length in day_pieces(hold.start, end, zone):
            tally(day).held += length
    return [days[day].figures(day, zone) for day in sorted(days)]


def _take(state: _Carried, sample: Sample, tally: Callable[[date], DayTally], zone: ZoneInfo) -> None:
    """Carry a report's keys into the state; a rise of ``panel_changes`` is that many manual changes."""
    if sample.hvac_action is not None:
        state.action = sample.hvac_action
    if sample.outdoor_c is not None:
        state.outdoor = sample.outdoor_c
    if sample.target_c is not None and sample.target_c != state.target:
        state.target = sample.target_c
        state.targets.append((sample.at, sample.target_c))
    if sample.panel_changes is not None:
        before = state.panel_changes
        if before is not None and sample.panel_changes > before:
            tally(sample.at.astimezone(zone).date()).manual_changes += sample.panel_changes - before
        state.panel_changes = sample.panel_changes


def _count_stretch(day: DayTally, state: _Carried, length: timedelta) -> None:
    day.covered += length
    if state.action == HEATING:
        day.heating += length
    elif state.action == COOLING:
        day.cooling += length
    if state.outdoor is not None:
        minutes = length / MINUTE
        day.degree_minutes += max(0.0, HDD_BASE_C - state.outdoor) * minutes
        day.outdoor_minutes += minutes
        day.outdoor_sum += state.outdoor * minutes


def _away_spans(
    targets: list[tuple[datetime, float]], last_end: datetime | None
) -> Iterator[tuple[datetime, datetime]]:
    """Target stretches of ``AWAY_AFTER`` or longer below the degree-day base."""
    if last_end is None or not targets:
        return
    ends = [at for at, _ in targets[1:]] + [last_end]
    for (start, target), end in zip(targets, ends, strict=True):
        if target < HDD_BASE_C and end - start >= AWAY_AFTER:
            yield start, end


class HoldsAndZones:
    """The home journal folded into what the runtime report needs of it: each device's holds as spans, and
    each home's zone (``home.timezone_set``, the newest)."""

    def __init__(self) -> None:
        self.zones: dict[str, str] = {}
        self._holds: dict[str, list[Span]] = {}
        self._open: dict[str, tuple[datetime, datetime]] = {}  # device -> (start, hold_until)

    def apply(self, fact: HomeFact) -> None:
        if isinstance(fact, HomeTimezoneSet):
            self.zones[fact.home_id] = fact.payload.timezone
        elif fact.device_id is None:
            return
        elif isinstance(fact, ScheduleHoldStarted):
            self._close(fact.device_id, fact.occurred_at)
            self._open[fact.device_id] = (fact.occurred_at, fact.payload.hold_until)
        elif isinstance(fact, ScheduleResumed | ScheduleSet):
            self._close(fact.device_id, fact.occurred_at)

    def _close(self, device_id: str, at: datetime) -> None:
        opened = self._open.pop(device_id, None)
        if opened is not None:
            start, until = opened
            end = min(until, max(at, start))
            if end > start:
                self._holds.setdefault(device_id, []).append(Span(start, end))

    def holds(self) -> dict[str, list[Span]]:
        """Every device's holds, sorted by start; a hold still open ends at its ``hold_until``."""
        found = {device: list(spans) for device, spans in self._holds.items()}
        for device, (start, until) in self._open.items():
            if until > start:
                found.setdefault(device, []).append(Span(start, until))
        return {device: sorted(spans, key=lambda s: s.start) for device, spans in found.items()}
