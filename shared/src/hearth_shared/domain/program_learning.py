"""Suggested programs: one thermostat's manual changes -> a weekly program, with its evidence.

Pure (no clock, no I/O, no Spark): the learning job (``hearth_analytics.jobs.learn``) finds each device's
manual changes in the journal (a report whose ``panel_changes`` count went up, at its device time, with the
``target_c`` it set) and hands them here, one device at a time.

How a program is found, and why it is robust to what households do:

* A change is placed by its **local** wall-clock time in the device's zone (the thermostat's
  ``time_zone``), and by its **day type**: weekdays (mon-fri) and weekends (sat, sun) are learned apart,
  since routines differ between them.
* Per day type, changes are **clustered by time of day and target**, greedily: the change around which
  most days have a change within ``window_min`` (30) to about its target (within 0.5 °C) is a habit's
  centre; its cluster is every such change around the median time of those, and it is taken out before
  the next habit is looked for. So a habit is a time *and* a temperature: a late morning's comfort
  target does not join the setback the household sets a little later, nor does an away week's target
  join the habit whose time it took. A cluster's time is its **median** (rounded to 5 minutes) and its
  target the median target (rounded to the thermostat's 0.5 °C step), so a few late or early days do not
  move it.
* A cluster is kept only if it was **seen in most weeks and on most days**: in more than ``most`` (half)
  of the weeks observed, the ISO weeks (Monday to Sunday) from the first change to the last, and on more
  than half of the day type's active days (days with any change of that type). An odd day (the other
  day type's routine, everything two hours late) and an away week's return at a strange hour are seen
  in a week or two, and left out; a few odd days spread over most weeks are still a minority of days
  (a program by day type would apply them to every day of the type); and everything is left out when
  fewer than ``min_weeks`` (2) weeks are observed.
* The evidence says how much and how regular: ``weeks`` observed, ``changes`` (the manual changes the
  program's entries explain) and ``regularity`` (their share of every manual change in those weeks);
  per entry, the weeks it was seen in, its changes, the share of that day type's active days (days with
  any change) it was seen on, and its spread (the median distance from its time, in minutes).

Nothing here changes a schedule: the job publishes the result as a ``schedule.suggested`` fact, and
only a person's ``accept`` turns it into the device's program (``hearth_shared.domain.home_view``).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from zoneinfo import ZoneInfo

import msgspec

from hearth_shared.domain.schedule import DAYS, ProgramEntry, ScheduledCommand

WEEKDAYS = DAYS[:5]
WEEKEND = DAYS[5:]
WINDOW_MIN = 30
TARGET_TOLERANCE_C = 0.5
MOST = 0.5
MIN_WEEKS = 2
ROUND_MIN = 5
STEP_C, MIN_C, MAX_C = 0.5, 7.0, 35.0  # the thermostat's targets (hearth_shared.domain.thermostat)
COMMAND = "set_target_temperature"


@dataclass(frozen=True)
class ManualChange:
    """A target set by hand on the device: when (aware; the device's clock) and to what."""

    at: datetime
    target_c: float


class EntryEvidence(msgspec.Struct, frozen=True, kw_only=True):
    """Why one entry is in the program (same order as the program)."""

    weeks_seen: int
    changes: int
    regularity: float  # share of the day type's active days it was seen on
    spread_min: float  # median distance of its changes from its time


class SuggestionEvidence(msgspec.Struct, frozen=True, kw_only=True):
    weeks: int  # ISO weeks observed, first change to last
    changes: int  # manual changes the program's entries explain
    regularity: float  # their share of every manual change in those weeks
    timezone: str  # the zone the times were read in (the thermostat's own ``time_zone``)
    first_change: datetime
    last_change: datetime


@dataclass(frozen=True)
class Suggestion:
    program: tuple[ProgramEntry, ...]
    evidence: SuggestionEvidence
    entries: tuple[EntryEvidence, ...]


@dataclass(frozen=True)
class _Local:
    day: date
    minute: int
    target_c: float

    @property
    def week(self) -> tuple[int, int]:
        iso = self.day.isocalendar()
        return iso.year, iso.week


def _weeks_observed(first: date, last: date) -> int:
    monday_first = first.toordinal() - first.weekday()
    monday_last = last.toordinal() - last.weekday()
    return (monday_last - monday_first) // 7 + 1


def _support(by_minute: Sequence[_Local], minute: float, target: float, window: int) -> list[_Local]:
    """The changes (sorted by minute) within ``window`` minutes of ``minute`` and about ``target``."""
    lo = bisect.bisect_left(by_minute, minute - window, key=lambda c: c.minute)
    hi = bisect.bisect_right(by_minute, minute + window, key=lambda c: c.minute)
    return [c for c in by_minute[lo:hi] if abs(c.target_c - target) <= TARGET_TOLERANCE_C]


def _habits(changes: list[_Local], window: int) -> list[list[_Local]]:
    """The day type's changes, clustered greedily around the times and targets most days share (module
    docstring)."""
    remaining = sorted(changes, key=lambda c: (c.minute, c.day))
    found: list[list[_Local]] = []
    while remaining:
        best = max(
            remaining,
            key=lambda c: (
                len({m.day for m in _support(remaining, c.minute, c.target_c, window)}),
                -c.minute,
            ),
        )
        first = _support(remaining, best.minute, best.target_c, window)
        centre = statistics.median(c.minute for c in first)
        members = _support(remaining, centre, best.target_c, window) or first
        found.append(members)
        taken = {id(c) for c in members}
        remaining = [c for c in remaining if id(c) not in taken]
    return found


def _round_target(target: float) -> float:
    stepped = int(target / STEP_C + 0.5) * STEP_C
    return min(MAX_C, max(MIN_C, stepped))


def _at(minute: float) -> str:
    rounded = int(minute / ROUND_MIN + 0.5) * ROUND_MIN % (24 * 60)
    return f"{rounded // 60:02d}:{rounded % 60:02d}"


def suggest_program(
    changes: Sequence[ManualChange],
    time_zone: str,
    *,
    window_min: int = WINDOW_MIN,
    most: float = MOST,
    min_weeks: int = MIN_WEEKS,
) -> Suggestion | None:
    """The program a device's manual changes repeat, or None when no habit is seen in most weeks."""
    if not changes:
        return None
    tz = ZoneInfo(time_zone)
    ordered = sorted(changes, key=lambda c: c.at)
    local = []
    for change in ordered:
        wall = change.at.astimezone(tz)
        local.append(_Local(wall.date(), wall.hour * 60 + wall.minute, change.target_c))
    weeks = _weeks_observed(local[0].day, local[-1].day)
    if weeks < min_weeks:
        return None
    entries: list[tuple[tuple[str, ...], str, ProgramEntry, EntryEvidence]] = []
    for days in (WEEKDAYS, WEEKEND):
        of_type = [c for c in local if DAYS[c.day.weekday()] in days]
        active_days = len({c.day for c in of_type})
        for members in _habits(of_type, window_min):
            weeks_seen, days_seen = len({c.week for c in members}), len({c.day for c in members})
            if weeks_seen <= most * weeks or days_seen <= most * active_days:
                continue
            centre = statistics.median(c.minute for c in members)
            at = _at(centre)
            target = _round_target(statistics.median(c.target_c for c in members))
            evidence = EntryEvidence(
                weeks_seen=weeks_seen,
                changes=len(members),
                regularity=round(days_seen / active_days, 3),
                spread_min=float(statistics.median(abs(c.minute - centre) for c in members)),
            )
            entry = ProgramEntry(
                days=days, at=at, command=ScheduledCommand(name=COMMAND, params={"target_c": target})
            )
            entries.append((days, at, entry, evidence))
    entries = _one_per_time(entries)
    if not entries:
        return None
    explained = sum(e.changes for *_, e in entries)
    return Suggestion(
        program=tuple(entry for _, _, entry, _ in entries),
        evidence=SuggestionEvidence(
            weeks=weeks,
            changes=explained,
            regularity=round(explained / len(local), 3),
            timezone=time_zone,
            first_change=ordered[0].at,
            last_change=ordered[-1].at,
        ),
        entries=tuple(e for *_, e in entries),
    )


def _one_per_time(
    entries: list[tuple[tuple[str, ...], str, ProgramEntry, EntryEvidence]],
) -> list[tuple[tuple[str, ...], str, ProgramEntry, EntryEvidence]]:
    """Two habits rounded to the same time of one day type are one entry (the better seen), so the
    program passes ``check_program``; entries in order of day type, then time."""
    kept: dict[tuple[tuple[str, ...], str], tuple[tuple[str, ...], str, ProgramEntry, EntryEvidence]] = {}
    for item in entries:
        key = (item[0], item[1])
        if key not in kept or item[3].changes > kept[key][3].changes:
            kept[key] = item
    return sorted(kept.values(), key=lambda item: (item[0] != WEEKDAYS, item[1]))
