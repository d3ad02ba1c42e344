"""Schedules: a device's weekly program, turned into transitions at exact instants in the home's zone.

Pure (no clock, no I/O): every function takes the time it reasons about.

* A **program** is a list of entries ``{days, at, command}``: on those weekdays, at that local wall-clock
  time, the device gets that command. ``at`` is ``HH:MM`` (the contract) or ``HH:MM:SS`` (a superset we
  accept, so a test or a demo need not wait a minute).
* A **transition** is one entry on one local date, resolved to a UTC instant with ``zoneinfo``:

  - a wall-clock time that does not exist (spring-forward skipped it) fires at the end of the gap, the
    first instant of the new offset (Berlin 2026-03-29 02:30 fires at 03:00 CEST = 01:00 UTC);
  - a wall-clock time that happens twice (fall-back) fires at its first occurrence (``fold=0``, the
    earlier instant), never at the second;
  - two entries that resolve to the same instant (two times inside one gap) are one transition, the later
    wall-clock time's command: it is the one a person reading the program expects in force afterwards.

  So across any DST change each entry fires exactly once per day it names.
* The transition **in force** at ``now`` is the latest one at or before ``now``; after an outage that is
  the one the device gets, once (``hearth_shared.domain.schedule_hold``), not each one it missed.
* A transition's command id is derived from (device, instant) (``transition_command_id``): a restarted or
  second scheduler sends the very same command id, and the device actor records a command id once.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # index = date.weekday()
_AT = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?$")
MAX_ENTRIES = 64
# Transitions are looked for this many local days back and ahead: a weekly program has one within 7.
_HORIZON_DAYS = 8

SCHEDULE_NAMESPACE = uuid.UUID("9b0f3c1e-6a57-4f0e-9a43-2d3c5e7f8a10")


class ScheduleInvalid(ValueError):
    """A program or zone the platform cannot run; ``reason`` is machine-readable, ``where`` points at it."""

    def __init__(self, reason: str, message: str, where: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.where = where


class ScheduledCommand(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    params: dict[str, Any] = {}


class ProgramEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    days: tuple[str, ...]
    at: str
    command: ScheduledCommand
    preheat: bool = False  # start early enough to reach a raised target at ``at`` (domain/preheat.py)


class Transition(msgspec.Struct, frozen=True, kw_only=True):
    """One entry on one local date: when it fires (UTC), what the wall clock said, and the command."""

    instant: datetime  # UTC
    local: datetime  # the instant in the home's zone (aware: its UTC offset is the offset it fires at)
    entry: int  # index into the program
    command: ScheduledCommand


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; ``ScheduleInvalid("unknown_timezone")`` for anything else."""
    if not name or "\x00" in name or name.startswith(("/", ".")) or ".." in name:
        raise ScheduleInvalid("unknown_timezone", f"{name!r} is not an IANA time zone", ("timezone",))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ScheduleInvalid(
            "unknown_timezone", f"{name!r} is not an IANA time zone", ("timezone",)
        ) from exc


def parse_at(at: str) -> time:
    match = _AT.fullmatch(at)
    if match is None:
        raise ValueError(f"{at!r} is not a time of day HH:MM (or HH:MM:SS), 00:00-23:59")
    return time(int(match[1]), int(match[2]), int(match[3] or 0))


def check_program(program: list[ProgramEntry]) -> None:
    """Raise ``ScheduleInvalid`` for a program that cannot be run: bad days or times, or two entries on
    the same day at the same time (which would be in force is not decidable)."""
    if len(program) > MAX_ENTRIES:
        raise ScheduleInvalid("too_many_entries", f"a program has at most {MAX_ENTRIES} entries", ())
    seen: dict[tuple[str, time], int] = {}
    for i, entry in enumerate(program):
        if not entry.days:
            raise ScheduleInvalid("no_days", "name at least one day", (i, "days"))
        for day in entry.days:
            if day not in DAYS:
                raise ScheduleInvalid("unknown_day", f"{day!r} is not one of {', '.join(DAYS)}", (i, "days"))
        try:
            at = parse_at(entry.at)
        except ValueError as exc:
            raise ScheduleInvalid("invalid_time", str(exc), (i, "at")) from exc
        for day in entry.days:
            if (day, at) in seen:
                raise ScheduleInvalid(
                    "duplicate_time", f"entries {seen[(day, at)]} and {i} both fire on {day} at {entry.at}",
                    (i, "at"),
                )  # fmt: skip
            seen[(day, at)] = i


def _offset_change(tz: ZoneInfo, lo: int, hi: int) -> int:
    """The first whole second in (lo, hi] whose UTC offset differs from lo's (there is one: a gap)."""
    before = datetime.fromtimestamp(lo, tz).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return hi


def resolve(local: datetime, tz: ZoneInfo) -> datetime:
    """A naive local wall-clock time as the UTC instant it fires at (see the module's DST rules)."""
    first = local.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = local.replace(tzinfo=tz, fold=1).astimezone(UTC)
    earlier = min(first, second)
    if earlier.astimezone(tz).replace(tzinfo=None) == local:
        return earlier  # exists (once, or twice: the first occurrence)
    # Skipped: the gap lies between the two readings; it ends where the new offset starts.
    lo, hi = int(min(first, second).timestamp()), int(max(first, second).timestamp())
    return datetime.fromtimestamp(_offset_change(tz, lo, hi), UTC)


def _on_date(program: list[ProgramEntry], day: date, tz: ZoneInfo) -> list[Transition]:
    name = DAYS[day.weekday()]
    found: dict[datetime, tuple[time, Transition]] = {}
    for i, entry in enumerate(program):
        if name not in entry.days:
            continue
        at = parse_at(entry.at)
        instant = resolve(datetime.combine(day, at), tz)
        known = found.get(instant)
        if known is None or at > known[0]:
            found[instant] = (at, Transition(instant=instant, local=instant.astimezone(tz), entry=i,
                                             command=entry.command))  # fmt: skip
    return [t for _, t in found.values()]


def transitions(
    program: list[ProgramEntry], tz: ZoneInfo, start: datetime, end: datetime
) -> Iterator[Transition]:
    """Every transition with ``start < instant <= end``, in order, each once."""
    if not program or end <= start:
        return
    day = start.astimezone(tz).date() - timedelta(days=1)  # a day's transitions may fall before its date
    last = end.astimezone(tz).date() + timedelta(days=1)
    while day <= last:
        for t in sorted(_on_date(program, day, tz), key=lambda t: t.instant):
            if start < t.instant <= end:
                yield t
        day += timedelta(days=1)


def in_force(program: list[ProgramEntry], tz: ZoneInfo, now: datetime) -> Transition | None:
    """The latest transition at or before ``now`` and within ``_HORIZON_DAYS`` of it (None for an empty
    program). The days are read backwards from ``now``'s, so a schedule checked every minute reads one or
    two days, not the horizon's nine (the scheduler asks this of every schedule on every check)."""
    start = now - timedelta(days=_HORIZON_DAYS)
    day = now.astimezone(tz).date() + timedelta(days=1)  # a day's transitions may fall before its date
    first = start.astimezone(tz).date() - timedelta(days=1)
    latest: Transition | None = None
    while day >= first:
        found = [t for t in _on_date(program, day, tz) if start < t.instant <= now]
        if found:
            best = max(found, key=lambda t: t.instant)
            if latest is not None and latest.instant >= best.instant:
                return latest  # the day after had the later one (a day's transitions precede its date)
            latest = best
        elif latest is not None:
            return latest
        day -= timedelta(days=1)
    return latest


def upcoming(program: list[ProgramEntry], tz: ZoneInfo, now: datetime, count: int = 5) -> list[Transition]:
    """The next ``count`` transitions after ``now``."""
    found: list[Transition] = []
    start = now
    while len(found) < count and program:
        window = list(transitions(program, tz, start, start + timedelta(days=_HORIZON_DAYS)))
        if not window:
            break
        found += window
        start = window[-1].instant
    return found[:count]


def next_after(program: list[ProgramEntry], tz: ZoneInfo, moment: datetime) -> Transition | None:
    following = upcoming(program, tz, moment, 1)
    return following[0] if following else None


def transition_command_id(device_id: str, instant: datetime) -> uuid.UUID:
    """The command id of ``device_id``'s transition at ``instant``: the same in every scheduler process."""
    return uuid.uuid5(SCHEDULE_NAMESPACE, f"{device_id}\n{instant.astimezone(UTC).isoformat()}")


def resume_command_id(device_id: str, instant: datetime, resumed_by: uuid.UUID) -> uuid.UUID:
    """The command id of re-applying the transition at ``instant`` when a hold is resumed: one per resume
    (the transition's own id was already used, and the actor would drop it as a repeat)."""
    return uuid.uuid5(SCHEDULE_NAMESPACE, f"{device_id}\n{instant.astimezone(UTC).isoformat()}\n{resumed_by}")
