"""The rollups' logic through ``HomeRollups``, without Spark: the streaming job hands it a home's readings
and the watermark per micro-batch and keeps its ``state`` (plain JSON) in Spark's state store; here the
test is the job. The figures' definitions are in ``hearth_analytics/rules/rollups.py``'s docstring.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hearth_analytics.rules.rollups import MINUTE_US, HomeRollups, Reading, clean_metrics

pytestmark = pytest.mark.unit

HOME = "home-1"
RETENTION_US = 10 * MINUTE_US
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def us(minutes: float) -> int:
    """Microseconds since the epoch, ``minutes`` after T0 (10:00:00)."""
    return int((T0 + timedelta(minutes=minutes)).timestamp() * 1_000_000)


def reading(device_id: str, minutes: float, version: int = 1, **kwargs: Any) -> Reading:
    return Reading(device_id=device_id, version=version, t_us=us(minutes), **kwargs)


def figures(records: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    return {key: json.loads(value) for key, value in records}


def rollups() -> HomeRollups:
    return HomeRollups(HOME, None, retention_us=RETENTION_US)


def test_on_time_readings_make_the_device_and_home_windows_of_both_lengths() -> None:
    out = figures(
        rollups().process(
            [
                reading("th-1", 0.25, 1, metrics={"ambient_c": 20.0}),
                reading("th-1", 0.75, 2, metrics={"ambient_c": 21.0, "humidity_pct": 40.0}),
                reading("th-2", 0.5, 1, metrics={"ambient_c": 18.0}),
            ],
            watermark_us=us(0),
        )
    )
    assert set(out) == {
        "device:th-1:1m:2026-11-22T10:00:00Z",
        "device:th-1:15m:2026-11-22T10:00:00Z",
        "device:th-2:1m:2026-11-22T10:00:00Z",
        "device:th-2:15m:2026-11-22T10:00:00Z",
        "home:home-1:1m:2026-11-22T10:00:00Z",
        "home:home-1:15m:2026-11-22T10:00:00Z",
    }
    device = out["device:th-1:1m:2026-11-22T10:00:00Z"]
    assert device["device_id"] == "th-1" and device["home_id"] == HOME
    assert (device["window_start"], device["window_end"]) == ("2026-11-22T10:00:00Z", "2026-11-22T10:01:00Z")
    assert device["readings"] == 2
    assert device["metrics"] == {
        "ambient_c": {"count": 2, "mean": 20.5, "min": 20.0, "max": 21.0},
        "humidity_pct": {"count": 1, "mean": 40.0, "min": 40.0, "max": 40.0},
    }
    home = out["home:home-1:15m:2026-11-22T10:00:00Z"]
    assert "device_id" not in home
    assert home["readings"] == 3
    assert home["metrics"]["ambient_c"] == {"count": 3, "mean": 59.0 / 3, "min": 18.0, "max": 21.0}


def test_a_late_reading_is_only_counted_and_its_window_emitted_again() -> None:
    home = rollups()
    home.process([reading("th-1", 0.5, 1, metrics={"ambient_c": 20.0})], watermark_us=us(0))
    out = figures(home.process([reading("th-1", 0.9, 2, metrics={"ambient_c": 30.0})], watermark_us=us(2)))
    window = out["device:th-1:1m:2026-11-22T10:00:00Z"]
    assert window["late_events"] == 1
    assert window["readings"] == 1 and window["metrics"]["ambient_c"]["max"] == 20.0  # unchanged
    assert out["home:home-1:15m:2026-11-22T10:00:00Z"]["late_events"] == 1


def test_a_reading_later_than_its_windows_retention_counts_on_the_watermarks_window() -> None:
    watermark = us(30.5)  # 10:00's 1m and 15m windows ended more than 10 minutes before it
    out = figures(rollups().process([reading("th-1", 0.5, metrics={"ambient_c": 1.0})], watermark))
    assert out["device:th-1:1m:2026-11-22T10:30:00Z"]["late_expired"] == 1
    assert out["home:home-1:15m:2026-11-22T10:30:00Z"]["late_expired"] == 1
    assert not any(key.endswith("T10:00:00Z") for key in out)
    assert all(f["readings"] == 0 for f in out.values())


def test_heating_time_is_split_over_the_windows_it_overlaps_and_summed_for_the_home() -> None:
    out = figures(
        rollups().process(
            [
                reading("th-1", 0.5, 1, states={"hvac_action": "heating"}),
                reading("th-1", 2.0, 2, states={"hvac_action": "idle"}),
                reading("th-2", 1.0, 1, states={"hvac_action": "cooling"}),
                reading("th-2", 1.5, 2, states={"hvac_action": "off"}),
            ],
            watermark_us=us(0),
        )
    )
    assert out["device:th-1:1m:2026-11-22T10:00:00Z"]["heating_minutes"] == 0.5
    assert out["device:th-1:1m:2026-11-22T10:01:00Z"]["heating_minutes"] == 1.0
    assert out["device:th-1:15m:2026-11-22T10:00:00Z"]["heating_minutes"] == 1.5
    assert out["device:th-2:1m:2026-11-22T10:01:00Z"]["cooling_minutes"] == 0.5
    home = out["home:home-1:15m:2026-11-22T10:00:00Z"]
    assert (home["heating_minutes"], home["cooling_minutes"]) == (1.5, 0.5)


def test_an_open_heating_interval_is_credited_up_to_the_watermark_once() -> None:
    home = rollups()
    home.process([reading("th-1", 0.0, 1, states={"hvac_action": "heating"})], watermark_us=us(0))
    first = figures(home.process([reading("th-2", 3.0, 1, metrics={"ambient_c": 20.0})], us(2.5)))
    assert first["device:th-1:15m:2026-11-22T10:00:00Z"]["heating_minutes"] == 2.5
    second = figures(home.process([reading("th-1", 4.0, 2, states={"hvac_action": "idle"})], us(3.0)))
    assert second["device:th-1:15m:2026-11-22T10:00:00Z"]["heating_minutes"] == 4.0  # not 2.5 twice


def test_an_older_on_time_change_is_counted_but_does_not_move_the_hvac_state() -> None:
    home = rollups()
    home.process([reading("th-1", 5.0, 2, states={"hvac_action": "heating"})], watermark_us=us(0))
    out = figures(home.process([reading("th-1", 4.0, 1, states={"hvac_action": "idle"})], watermark_us=us(0)))
    assert out["device:th-1:1m:2026-11-22T10:04:00Z"]["readings"] == 1
    assert home.state["since"]["hvac_action"]["th-1"] == ["heating", us(5.0)]


def test_lock_operations_and_jams() -> None:
    out = figures(
        rollups().process(
            [
                reading("lk-1", 0.1, 1, states={"lock_state": "locked"}),
                reading("lk-1", 0.2, 2, states={"lock_state": "unlocked"}),
                reading("lk-1", 0.3, 3, states={"lock_state": "locked"}),
                reading("lk-1", 0.4, 4, states={"lock_state": "jammed"}),
            ],
            watermark_us=us(0),
        )
    )
    window = out["device:lk-1:1m:2026-11-22T10:00:00Z"]
    assert (window["locks"], window["unlocks"], window["lock_operations"], window["jams"]) == (2, 1, 3, 1)


def test_the_state_survives_a_json_round_trip_like_sparks_state_store() -> None:
    batches = [
        ([reading("th-1", 0.5, 1, metrics={"ambient_c": 20.0}, states={"hvac_action": "heating"})], us(0)),
        ([reading("th-1", 1.5, 2, metrics={"ambient_c": 22.0})], us(0.75)),
        ([reading("th-1", 2.5, 3, states={"hvac_action": "idle"}), reading("th-1", 0.2, 9)], us(1.6)),
    ]
    kept = rollups()
    restored_state: dict[str, Any] | None = None
    for readings, watermark in batches:
        expected = kept.process(readings, watermark)
        restored = HomeRollups(HOME, restored_state, retention_us=RETENTION_US)
        assert restored.process(readings, watermark) == expected
        restored_state = json.loads(json.dumps(restored.state))


def test_windows_past_their_retention_leave_the_state() -> None:
    home = rollups()
    home.process([reading("th-1", 0.5, metrics={"ambient_c": 20.0})], watermark_us=us(0))
    assert len(home.state["w"]) == 4
    home.process([], watermark_us=us(11.5))  # the 1m windows ended 10:01, retention 10 minutes
    assert sorted(k.split("|")[1] for k in home.state["w"]) == ["15m", "15m"]
    home.process([], watermark_us=us(25))
    assert home.state["w"] == {}


def test_clean_metrics_keeps_only_what_the_report_carried() -> None:
    row = {"ambient_c": 20, "humidity_pct": float("nan"), "battery_pct": None, "other": 1.0}
    assert clean_metrics(row) == {"ambient_c": 20.0}


def test_a_lights_on_minutes_and_brightness_come_from_its_type() -> None:
    out = figures(
        rollups().process(
            [
                reading("li-1", 0.5, 1, metrics={"brightness_pct": 80.0}, states={"power": "on"}),
                reading("li-1", 2.0, 2, metrics={"brightness_pct": 40.0}, states={"power": "off"}),
            ],
            watermark_us=us(0),
        )
    )
    window = out["device:li-1:15m:2026-11-22T10:00:00Z"]
    assert window["on_minutes"] == 1.5
    assert window["metrics"]["brightness_pct"] == {"count": 2, "mean": 60.0, "min": 40.0, "max": 80.0}
    assert window["heating_minutes"] == 0 and window["lock_operations"] == 0  # every figure, one format


def test_a_state_checkpointed_before_the_types_declared_the_figures_is_read_by_name() -> None:
    old_window = [2, 1, 0, 30 * 1_000_000, 0, 1, 2, 0, {"ambient_c": [2, 41.0, 20.0, 21.0]}]
    old = {"w": {f"device|1m|{us(0)}|th-1": old_window}, "hvac": {"th-1": ["heating", us(0.5)]}}
    home = HomeRollups(HOME, old, retention_us=RETENTION_US)
    out = figures(home.process([reading("th-1", 0.75, 3, states={"hvac_action": "idle"})], us(0)))
    window = out["device:th-1:1m:2026-11-22T10:00:00Z"]
    assert window["heating_minutes"] == 0.75  # 30 s checkpointed + 10:00:30 to 10:00:45
    assert (window["locks"], window["unlocks"], window["lock_operations"]) == (1, 2, 3)
    assert (window["readings"], window["late_events"]) == (3, 1)
    assert window["metrics"]["ambient_c"]["count"] == 2
