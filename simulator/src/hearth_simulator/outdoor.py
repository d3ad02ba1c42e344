"""The outdoor temperature of a simulated home: a day and a season, in the home's time zone.

``Outdoor.temperature_c(t)`` (``t`` in seconds since the epoch) is the sum of

* the home's yearly mean ``mean_c`` (its climate, and with it the home's own offset from any other home);
* a season: ``season_swing_c`` below the mean on the coldest day of the year (``COLDEST_DAY``, 20 January
  in the northern hemisphere, 20 July in the southern), as far above it half a year later;
* a day: ``day_swing_c`` below that at 04:00 *local* time (the home's ``time_zone``, with its daylight
  saving), as far above it at 16:00.

A pure function of ``t``: no randomness and no clock, so every run of a home gives the same series (the
home's draw of mean and swings is ``Outdoor.for_home``, seeded by the home id). The UTC offset is
looked up once per hour of ``t`` and kept (the physics asks every simulated minute).

Where it shows up: the thermostat reports it as ``outdoor_c`` (what a thermostat with a weather feed
shows), with its ``time_zone``, so a learner finds both per home in the journal's state reports and
never in the simulator's settings (README, "Decisions where the contract is silent").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

DAY_S = 86_400.0
YEAR_DAYS = 365.2425
COLDEST_DAY = 19.0  # days after 1 January: 20 January
COLDEST_HOUR = 4.0  # local time

# The zones homes are drawn from, with their climate: (zone, yearly mean °C, season swing °C, south).
CLIMATES: tuple[tuple[str, float, float, bool], ...] = (
    ("Europe/London", 10.5, 6.5, False),
    ("Europe/Berlin", 9.5, 9.0, False),
    ("Europe/Stockholm", 7.0, 10.0, False),
    ("America/New_York", 12.5, 11.0, False),
    ("America/Chicago", 10.0, 13.0, False),
    ("America/Denver", 10.5, 11.5, False),
    ("Asia/Tokyo", 15.5, 10.5, False),
    ("Australia/Melbourne", 15.0, 5.0, True),
)


@dataclass
class Outdoor:
    """The outdoor temperature of one home (see the module docstring)."""

    time_zone: str = "UTC"
    mean_c: float = 10.0
    season_swing_c: float = 0.0
    day_swing_c: float = 5.0
    southern: bool = False
    _zone: ZoneInfo = field(init=False, repr=False)
    _offset_hour: float = field(init=False, default=math.nan, repr=False)
    _offset_s: float = field(init=False, default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._zone = ZoneInfo(self.time_zone)

    @classmethod
    def for_home(cls, rng: random.Random) -> Outdoor:
        """A home's climate: a zone of ``CLIMATES``, its mean moved by up to ±2 °C (the home's own
        offset: a valley, a coast), a daily swing of 3-7 °C."""
        zone, mean_c, season_c, south = rng.choice(CLIMATES)
        return cls(
            time_zone=zone,
            mean_c=round(mean_c + rng.uniform(-2.0, 2.0), 2),
            season_swing_c=season_c,
            day_swing_c=round(rng.uniform(3.0, 7.0), 2),
            southern=south,
        )

    def utc_offset_s(self, t: float) -> float:
        """The home's UTC offset at ``t`` (kept for the hour of ``t``)."""
        hour = t // 3600.0
        if hour != self._offset_hour:
            offset = datetime.fromtimestamp(t, UTC).astimezone(self._zone).utcoffset()
            self._offset_s = offset.total_seconds() if offset is not None else 0.0
            self._offset_hour = hour
        return self._offset_s

    def temperature_c(self, t: float) -> float:
        local = t + self.utc_offset_s(t)
        day_of_year = (local / DAY_S) % YEAR_DAYS  # the epoch is 1 January: close enough for a climate
        coldest = COLDEST_DAY + (YEAR_DAYS / 2 if self.southern else 0.0)
        season = -self.season_swing_c * math.cos(2 * math.pi * (day_of_year - coldest) / YEAR_DAYS)
        hour = (local % DAY_S) / 3600.0
        day = -self.day_swing_c * math.cos(2 * math.pi * (hour - COLDEST_HOUR) / 24.0)
        return self.mean_c + season + day


__all__ = ["CLIMATES", "Outdoor"]
