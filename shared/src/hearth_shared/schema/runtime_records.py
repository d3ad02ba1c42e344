"""The runtime report's records (issue 22 point 4): a thermostat's, or a home's, heating and cooling per day
of the home's own calendar, with the heating degree-days and what changed the runtime.

Written by the Spark batch ``hearth analytics runtime`` (``hearth_analytics.jobs.runtime_report``) to the
compacted rollups topic, projected by the read models like every rollup (the ``rollups`` table), and
served by the query API (``GET /v1/devices/{id}/runtime`` and ``GET /v1/homes/{id}/runtime``). Why the
rollups topic: it is where analytics already publishes windowed figures per device and per home for
the query API, and a day is one more window; the projector, rebuild and verify carry it with no change.

Key: ``f"{scope}:{id}:day:{local date}"``, e.g. ``device:th-1:day:2026-11-20``. The key, and so the
rollups row's ``window_start``, names the home's local date (the projector reads a date without an
offset as 00:00 UTC of that date: a label, not the day's first instant), so a record written again for
the same day replaces the one before, even if the home's zone was set in between. The day's instants
are in the value (``day_start``, ``day_end``, in the home's zone, with their offsets: a DST day is 23 or
25 hours).

The definitions (``hearth_analytics.rules.runtime_days`` computes them):

* ``heating_min``, ``cooling_min``: minutes of the day the thermostat reported ``hvac_action``
  ``heating`` / ``cooling``. A report's state holds until the device's next report, for at most
  ``MAX_SILENCE_MIN`` minutes: a longer silence is a gap, which counts nothing (``covered_min`` is the
  day's minutes that are not a gap).
* ``hdd``: heating degree-days, base ``HDD_BASE_C`` (18 degC), from the ``outdoor_c`` the thermostat
  reports (carried forward like any state): the day's integral of ``max(0, 18 - outdoor)`` over its
  covered minutes, in degree-days (degC x 24 h); null when the day has no outdoor value. A 25-hour day can
  hold more degree-days than a 24-hour one, as it holds more heating minutes.
* ``heating_min_per_hdd``: ``heating_min / hdd``; null when ``hdd`` is null or below ``MIN_HDD_FOR_RATIO``
  (0.5): on a mild day the ratio says nothing.
* ``outdoor_mean_c``: the time-weighted mean outdoor temperature over the covered minutes (null without
  one).
* ``manual_changes``: targets set by hand on the panel that day, the increments of ``panel_changes``.
* ``holds``: schedule holds that started that day (``schedule.hold_started`` on the home journal);
  ``hold_min``: the day's minutes under a hold (until ``hold_until``, a resume or a new program).
* ``away_min``: the day's minutes of an away stretch: the reported ``target_c`` unchanged for at least
  ``AWAY_AFTER_H`` (24) hours and below the degree-day base (nobody turned the dial for a day and the home
  was kept cool). The journal has no away fact; this is how the report tells an away week.

A home's record sums its thermostats' minutes and counts (device-minutes, as the rollups do), with
``devices``, the mean of their ``hdd`` and ``outdoor_mean_c`` (they share the home's outdoor), and
``heating_min_per_hdd`` of those: the home's heating device-minutes per degree-day.
"""

from __future__ import annotations

import msgspec

RUNTIME_WINDOW = "day"  # the rollups' window name of these records
HDD_BASE_C = 18.0
MAX_SILENCE_MIN = 60
AWAY_AFTER_H = 24
MIN_HDD_FOR_RATIO = 0.5
SCHEMA_VERSION = 1


class RuntimeFigures(msgspec.Struct, frozen=True, kw_only=True):
    """One day's figures (the definitions are in the module's docstring)."""

    day: str  # the home's local date, YYYY-MM-DD
    time_zone: str  # the home's IANA zone the day is counted in
    day_start: str  # the day's first instant, ISO 8601 with the zone's offset
    day_end: str  # the next day's first instant
    covered_min: float
    heating_min: float
    cooling_min: float
    hdd: float | None  # None: no outdoor temperature that day
    heating_min_per_hdd: float | None
    outdoor_mean_c: float | None
    manual_changes: int
    holds: int
    hold_min: float
    away_min: float


FIGURES = tuple(RuntimeFigures.__struct_fields__)


class RuntimeDayRecord(RuntimeFigures, frozen=True, kw_only=True):
    """The value of a runtime record on the rollups topic (JSON)."""

    schema_version: int = SCHEMA_VERSION
    scope: str  # "device" or "home"
    home_id: str
    device_id: str | None  # None for a home's record
    window: str = RUNTIME_WINDOW
    devices: int  # the thermostats counted (1 for a device's record)


RECORD_FIELDS = tuple(RuntimeDayRecord.__struct_fields__)


def runtime_key(scope: str, subject_id: str, day: str) -> str:
    """The record's key on the rollups topic: ``{scope}:{id}:day:{local date}``."""
    return f"{scope}:{subject_id}:{RUNTIME_WINDOW}:{day}"
