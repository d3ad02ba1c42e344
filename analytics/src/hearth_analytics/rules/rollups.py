"""Windowed telemetry rollups of one home: the pure logic the streaming job runs per home and micro-batch.

No Spark in here: ``stream.py`` calls ``HomeRollups.process`` from ``applyInPandasWithState`` (keyed by
``home_id``) with the home's new readings and Spark's current event-time watermark, and stores
``HomeRollups.state`` (plain JSON) in Spark's state store, so it is checkpointed and restored with the
query's offsets: a restarted query re-runs an unfinished micro-batch from the same state.

Windows: tumbling, 1 minute and 15 minutes, on event time (the device's clock, ``payload.device_time``),
for each device (scope ``device``) and for the whole home (scope ``home``).

Definitions (what the figures mean):

* **Late**: a reading whose event time is older than the watermark in effect when it is processed (the
  watermark is Spark's: the newest event time seen in earlier micro-batches minus
  ``allowed_lateness_s``). A late reading changes no figure; it is *counted* in ``late_events`` of each
  of its windows (device and home, 1 and 15 minutes) and that window's record is emitted again. Closed
  windows are kept ``retention_s`` past their end for this. A late reading whose window ended more than
  ``retention_s`` before the watermark is counted in ``late_expired`` of the window that holds the
  watermark (the oldest window still open) instead: it is in no window's figures, but never silently.
* **Readings and metrics**: on-time readings per window; for each numeric metric (each device type
  declares its own: ``StateKey.rollup`` in ``hearth_shared.domain``, e.g. ``ambient_c``, ``battery_pct``,
  ``brightness_pct``) the count, mean, min and max of the readings that carried it (a report holds only
  the keys that changed).
* **Minutes in a state** (``StateMinutes`` of a type, e.g. ``heating_minutes``: ``hvac_action`` is
  ``heating``; a light's ``on_minutes``): a device is in the state from a reading that reports the key at
  one of the values until its next reading that reports the key (any value). That time is split over the
  windows it overlaps. An interval still open is credited up to the watermark each time the home has
  new readings (a later on-time change cannot be older than the watermark), so a window's minutes are
  complete once the watermark has passed its end and the home has reported since. Home figures are sums
  over its devices (device-minutes). Changes are applied in event-time order; an on-time change older
  than the device's last applied change is counted as a reading but does not move the state.
* **State counts** (``StateCount`` of a type, e.g. ``locks``, ``jams``, ``lock_operations``): readings
  reporting the key at one of the values.

Every record carries every type's minutes and counts (0 where none), so the format is one for all.

Record on the rollups topic (compacted): key ``f"{scope}:{id}:{window}:{window_start}"``, e.g.
``device:th-1:1m:2026-11-22T10:15:00Z`` or ``home:h-1:15m:2026-11-22T10:15:00Z``; every emission of a
window carries all its figures so far, so the newest record of a key is the window's current value.
Value (JSON)::

    {"schema_version": 1, "scope": "device", "home_id": "h-1", "device_id": "th-1",  # no device_id for homes
     "window": "1m", "window_start": "2026-11-22T10:15:00Z", "window_end": "2026-11-22T10:16:00Z",
     "readings": 4,
     "metrics": {"ambient_c": {"count": 4, "mean": 20.5, "min": 20.1, "max": 21.0}, ...},  # present ones
     "heating_minutes": 0.75, "cooling_minutes": 0.0, ...,  # every StateMinutes
     "locks": 0, "unlocks": 0, "jams": 0, "lock_operations": 0, ...,  # every StateCount
     "late_events": 1, "late_expired": 0}
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from hearth_shared.domain.registry import counted_state_keys, rollup_metrics, state_counts, state_minutes

SCHEMA_VERSION = 1
MINUTE_US = 60_000_000
WINDOWS: tuple[tuple[str, int], ...] = (("1m", MINUTE_US), ("15m", 15 * MINUTE_US))
_LENGTH = dict(WINDOWS)
METRICS = rollup_metrics()
MINUTES = state_minutes()
COUNTS = state_counts()
# The text keys a Reading carries (those minutes and counts are figured from).
STATE_KEYS = counted_state_keys()
_MINUTE_KEYS = frozenset(m.key for m in MINUTES)

# A window's figures, as a list in the state: [readings, late, expired, {metric: [count, sum, min, max]},
# {minutes name: microseconds}, {count name: n}]
_READINGS, _LATE, _EXPIRED, _METRICS, _MINUTES, _COUNTS = range(6)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Reading:
    device_id: str
    version: int
    t_us: int  # event time, microseconds since the epoch (UTC)
    metrics: dict[str, float] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # the STATE_KEYS it reported


def iso(t_us: int) -> str:
    moment = _EPOCH + timedelta(microseconds=t_us)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (
        f".{moment.microsecond:06d}Z" if moment.microsecond else "Z"
    )


def rollup_key(scope: str, scope_id: str, window: str, start_us: int) -> str:
    return f"{scope}:{scope_id}:{window}:{iso(start_us)}"


def _new_window() -> list[Any]:
    return [0, 0, 0, {}, {}, {}]


def _upgrade(state: dict[str, Any]) -> dict[str, Any]:
    """A state checkpointed before the figures were declared by the device types (heating and cooling
    microseconds, locks, unlocks and jams in fixed places): the same figures, by name."""
    if "hvac" not in state:
        return state
    windows = {
        wkey: [r, late, expired, stats, {"heating_minutes": heat, "cooling_minutes": cool},
               {"locks": locks, "unlocks": unlocks, "jams": jams, "lock_operations": locks + unlocks}]
        for wkey, (r, late, expired, heat, cool, locks, unlocks, jams, stats) in state["w"].items()
    }  # fmt: skip
    return {"w": windows, "since": {"hvac_action": state["hvac"]}}


class HomeRollups:
    """One home's open (and recently closed) windows, and since when each device is in the values of
    the keys minutes are counted for (``since``: key -> device -> [value, since_us])."""

    def __init__(self, home_id: str, state: dict[str, Any] | None, *, retention_us: int) -> None:
        self.home_id = home_id
        self.retention_us = retention_us
        self.state: dict[str, Any] = _upgrade(state) if state else {"w": {}, "since": {}}
        self._touched: set[str] = set()

    # ------------------------------------------------------------------------------------------ inputs

    def process(self, readings: Iterable[Reading], watermark_us: int) -> list[tuple[str, str]]:
        """Apply new readings at this watermark; the ``(key, value)`` records of every changed window."""
        self._touched = set()
        since_by_key: dict[str, dict[str, list[Any]]] = self.state["since"]
        for key, since in since_by_key.items():
            for device_id, current in since.items():
                value, start = current
                if start < watermark_us and self._credit(device_id, key, value, start, watermark_us):
                    current[1] = watermark_us
        for r in sorted(readings, key=lambda r: (r.t_us, r.device_id, r.version)):
            if r.t_us < watermark_us:
                self._late(r, watermark_us)
                continue
            for window in self._windows_of(r.device_id, r.t_us):
                self._count(window, r)
            for key, value in r.states.items():
                if key not in _MINUTE_KEYS:
                    continue
                since = since_by_key.setdefault(key, {})
                previous = since.get(r.device_id)
                if previous is None:
                    since[r.device_id] = [value, r.t_us]
                elif r.t_us >= previous[1]:
                    self._credit(r.device_id, key, previous[0], previous[1], r.t_us)
                    since[r.device_id] = [value, r.t_us]
        records = [self._record(k) for k in sorted(self._touched)]
        self._evict(watermark_us)
        return records

    def _late(self, r: Reading, watermark_us: int) -> None:
        for window in self._windows_of(r.device_id, r.t_us):
            scope, scope_id, label, start = self._parse(window)
            length = _LENGTH[label]
            if start + length + self.retention_us > watermark_us:
                self._get(window)[_LATE] += 1
            else:  # its window is gone: count it on the window that holds the watermark
                self._get(self._wkey(scope, scope_id, label, watermark_us - watermark_us % length))[
                    _EXPIRED
                ] += 1

    def _count(self, wkey: str, r: Reading) -> None:
        w = self._get(wkey)
        w[_READINGS] += 1
        stats: dict[str, list[float]] = w[_METRICS]
        for name, value in r.metrics.items():
            s = stats.get(name)
            if s is None:
                stats[name] = [1, value, value, value]
            else:
                s[0] += 1
                s[1] += value
                s[2] = min(s[2], value)
                s[3] = max(s[3], value)
        counts: dict[str, int] = w[_COUNTS]
        for count in COUNTS:
            if r.states.get(count.key) in count.values:
                counts[count.name] = counts.get(count.name, 0) + 1

    def _credit(self, device_id: str, key: str, value: str, start_us: int, end_us: int) -> bool:
        """Add ``[start_us, end_us)`` to every window it overlaps, for each minutes figure ``key`` at
        ``value`` counts for; False if none does."""
        names = [m.name for m in MINUTES if m.key == key and value in m.values]
        for label, length in WINDOWS:
            start = start_us - start_us % length
            while names and start < end_us:
                overlap = min(end_us, start + length) - max(start_us, start)
                for scope, scope_id in (("device", device_id), ("home", self.home_id)):
                    minutes: dict[str, int] = self._get(self._wkey(scope, scope_id, label, start))[_MINUTES]
                    for name in names:
                        minutes[name] = minutes.get(name, 0) + overlap
                start += length
        return bool(names)

    def _evict(self, watermark_us: int) -> None:
        windows: dict[str, list[Any]] = self.state["w"]
        for wkey in list(windows):
            _scope, _id, label, start = self._parse(wkey)
            if start + _LENGTH[label] + self.retention_us <= watermark_us:
                del windows[wkey]

    # ----------------------------------------------------------------------------------------- windows

    def _windows_of(self, device_id: str, t_us: int) -> list[str]:
        keys = []
        for label, length in WINDOWS:
            start = t_us - t_us % length
            keys.append(self._wkey("device", device_id, label, start))
            keys.append(self._wkey("home", self.home_id, label, start))
        return keys

    @staticmethod
    def _wkey(scope: str, scope_id: str, label: str, start_us: int) -> str:
        return f"{scope}|{label}|{start_us}|{scope_id}"

    @staticmethod
    def _parse(wkey: str) -> tuple[str, str, str, int]:
        scope, label, start, scope_id = wkey.split("|", 3)
        return scope, scope_id, label, int(start)

    def _get(self, wkey: str) -> list[Any]:
        self._touched.add(wkey)
        windows: dict[str, list[Any]] = self.state["w"]
        w = windows.get(wkey)
        if w is None:
            w = windows[wkey] = _new_window()
        return w

    def _record(self, wkey: str) -> tuple[str, str]:
        scope, scope_id, label, start = self._parse(wkey)
        w = self.state["w"][wkey]
        value: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "scope": scope, "home_id": self.home_id}
        if scope == "device":
            value["device_id"] = scope_id
        value.update(
            window=label,
            window_start=iso(start),
            window_end=iso(start + _LENGTH[label]),
            readings=w[_READINGS],
            metrics={
                name: {"count": n, "mean": total / n, "min": low, "max": high}
                for name, (n, total, low, high) in sorted(w[_METRICS].items())
            },
            **{m.name: w[_MINUTES].get(m.name, 0) / MINUTE_US for m in MINUTES},
            **{c.name: w[_COUNTS].get(c.name, 0) for c in COUNTS},
            late_events=w[_LATE],
            late_expired=w[_EXPIRED],
        )
        return rollup_key(scope, scope_id, label, start), msgspec.json.encode(value).decode()


def figure_names() -> tuple[str, ...]:
    """The minutes and counts every record carries, as the device types declare them."""
    return (*(m.name for m in MINUTES), *(c.name for c in COUNTS))


def clean_metrics(row: dict[str, Any]) -> dict[str, float]:
    """The metrics a reading carried (NaN/None: the key was not in the report)."""
    found = {}
    for name in METRICS:
        value = row.get(name)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            found[name] = float(value)
    return found
