"""The occupants of a simulated home: when they change a thermostat's target by hand, and to what.

A ``Household`` has a ``Routine``: the changes of a weekday and of a weekend day (minutes after local
midnight, target °C), e.g. 21.5 at 06:40, 17.5 at 08:15, 21.5 at 17:30, 18.0 at 22:45. Each day it
follows its routine with a few minutes' ``jitter`` (normal, at most three of them either way), except on

* **odd days** (a share ``odd_day_share`` of days): a sick day, a late night or a day off; the day follows
  the other day type's routine, or skips one of its changes, or makes each change an hour or two late;
* **away weeks** (a share ``away_week_share`` of weeks, Monday to Sunday local): the routine's first
  change of the Monday goes to ``away_c`` instead, nothing else changes until Sunday, when the household
  comes home at about 17:00 and sets the evening's target.

Every draw comes from a generator seeded by (the run's seed, the home, the day or the week, the room), so a
day's changes do not depend on which span is simulated, and the same seed gives the same history.
``Household.for_home`` draws a household (its routine, jitter, shares, away target) from the home's own
generator; each thermostat of the home (a room, ``room``) follows the same routine, moved by its own
``room_offset_c`` and with its own jitter.

The learner never sees any of this: only the journal's state reports with ``target_c`` and the
thermostat's ``panel_changes`` count (sim_thermostat.py says how a manual change shows up there).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

MINUTES_PER_DAY = 24 * 60
RETURN_FROM_AWAY_MIN = 17 * 60  # the Sunday an away week ends: home at about 17:00


@dataclass(frozen=True)
class Change:
    """A change of a routine: ``target_c`` at ``minute`` (after local midnight)."""

    minute: float
    target_c: float


@dataclass(frozen=True)
class Routine:
    weekday: tuple[Change, ...]
    weekend: tuple[Change, ...]

    def of(self, day: date) -> tuple[Change, ...]:
        return self.weekend if day.weekday() >= 5 else self.weekday


@dataclass(frozen=True)
class ManualChange:
    """A change the household makes: ``target_c`` at ``t`` (seconds since the epoch)."""

    t: float
    target_c: float


@dataclass(frozen=True)
class Household:
    home_id: str
    time_zone: str
    routine: Routine
    jitter_min: float = 5.0
    odd_day_share: float = 0.1
    away_week_share: float = 0.1
    away_c: float = 15.0
    seed: int = 0

    @classmethod
    def for_home(cls, home_id: str, time_zone: str, *, seed: int = 0) -> Household:
        """A household with a routine drawn for the home (waking 06:00-07:30, leaving 07:45-09:00, back
        16:30-18:30, asleep 22:00-23:30; weekends later), comfort 20.5-22.0 °C, setback 16.5-18.5 °C."""
        rng = random.Random(f"{seed}/household/{home_id}")
        comfort = rng.choice((20.5, 21.0, 21.5, 22.0))
        night = rng.choice((16.5, 17.0, 17.5, 18.0, 18.5))
        away_day = rng.choice((16.5, 17.0, 17.5, 18.0))

        def at(low_h: float, high_h: float) -> float:
            return float(round(rng.uniform(low_h, high_h) * 60 / 5) * 5)  # habits fall on 5 minutes

        wake, leave, back, sleep = at(6.0, 7.5), at(7.75, 9.0), at(16.5, 18.5), at(22.0, 23.5)
        weekday = (
            Change(wake, comfort),
            Change(leave, away_day),
            Change(back, comfort),
            Change(sleep, night),
        )
        weekend = (Change(at(8.0, 9.5), comfort), Change(min(at(23.0, 24.5), MINUTES_PER_DAY - 5), night))
        return cls(
            home_id=home_id,
            time_zone=time_zone,
            routine=Routine(weekday, weekend),
            jitter_min=rng.uniform(2.0, 8.0),
            odd_day_share=rng.uniform(0.05, 0.15),
            away_week_share=rng.uniform(0.0, 0.2),
            away_c=rng.choice((14.0, 15.0, 16.0)),
            seed=seed,
        )

    def is_away_week(self, monday: date) -> bool:
        return random.Random(f"{self.seed}/away/{self.home_id}/{monday.isoformat()}").random() < (
            self.away_week_share
        )

    def day_plan(self, day: date) -> list[Change]:
        """The day's changes (local minutes, sorted), before jitter: the routine, an odd day's, an away
        week's."""
        monday = day - timedelta(days=day.weekday())
        if self.is_away_week(monday):
            if day == monday and self.routine.weekday:
                return [Change(self.routine.weekday[0].minute, self.away_c)]
            if day.weekday() == 6:
                return [Change(RETURN_FROM_AWAY_MIN, self.target_at(day, RETURN_FROM_AWAY_MIN))]
            return []
        plan = list(self.routine.of(day))
        rng = random.Random(f"{self.seed}/odd/{self.home_id}/{day.isoformat()}")
        if rng.random() >= self.odd_day_share or not plan:
            return plan
        kind = rng.choice(("other_day_type", "skipped", "late"))
        if kind == "other_day_type":
            return list(self.routine.weekday if day.weekday() >= 5 else self.routine.weekend)
        if kind == "skipped":
            del plan[rng.randrange(len(plan))]
            return plan
        late = rng.uniform(60.0, 120.0)
        return [Change(min(c.minute + late, MINUTES_PER_DAY - 1), c.target_c) for c in plan]

    def target_at(self, day: date, minute: float) -> float:
        """The routine's target in force at ``minute`` of ``day`` (the last change before it, else the
        day before's last)."""
        earlier = [c for c in self.routine.of(day) if c.minute <= minute]
        if earlier:
            return earlier[-1].target_c
        before = self.routine.of(day - timedelta(days=1))
        return before[-1].target_c if before else self.away_c

    def changes(
        self, start: float, end: float, *, room: str = "", room_offset_c: float = 0.0
    ) -> list[ManualChange]:
        """Every change the household makes to the room's thermostat in ``[start, end)`` (epoch seconds),
        in time order, jittered, moved by ``room_offset_c``."""
        zone = ZoneInfo(self.time_zone)
        first = datetime.fromtimestamp(start, UTC).astimezone(zone).date() - timedelta(days=1)
        last = datetime.fromtimestamp(end, UTC).astimezone(zone).date()
        out: list[ManualChange] = []
        day = first
        while day <= last:
            rng = random.Random(f"{self.seed}/jitter/{self.home_id}/{room}/{day.isoformat()}")
            for change in self.day_plan(day):
                jitter = max(-3.0, min(3.0, rng.gauss(0.0, 1.0))) * self.jitter_min
                minute = change.minute + jitter
                local = datetime(day.year, day.month, day.day, tzinfo=zone) + timedelta(minutes=minute)
                t = local.timestamp()
                if start <= t < end:
                    out.append(ManualChange(t, _half_steps(change.target_c + room_offset_c)))
            day += timedelta(days=1)
        out.sort(key=lambda c: c.t)
        return out


def _half_steps(target_c: float) -> float:
    """The thermostat's panel moves in 0.5 °C steps (as its commands do)."""
    return math.floor(target_c * 2 + 0.5) / 2


__all__ = ["Change", "Household", "ManualChange", "Routine"]
