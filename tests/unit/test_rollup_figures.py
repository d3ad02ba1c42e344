"""The streaming rollups' figures come from the device types' declarations (minutes in a state, state
counts, numeric metrics), and a state checkpointed in the older fixed layout is read on."""

from __future__ import annotations

import math

import msgspec
import pytest

from hearth_analytics.rules.rollups import COUNTS, METRICS, MINUTES, HomeRollups, Reading, figure_names
from hearth_shared.domain.registry import DEVICE_TYPES

pytestmark = pytest.mark.unit

MINUTE_US = 60_000_000
T0 = 1_763_632_800 * 1_000_000  # 2025-11-20T10:00:00Z


def records(rollups: HomeRollups, readings: list[Reading], watermark_us: int) -> dict[str, dict[str, object]]:
    return {key: msgspec.json.decode(value) for key, value in rollups.process(readings, watermark_us)}


def test_every_declared_figure_is_rolled_up() -> None:
    for kind in DEVICE_TYPES.values():
        assert {k.name for k in kind.state if k.rollup} <= set(METRICS)
        assert {m.name for m in kind.minutes} <= {m.name for m in MINUTES}
        assert {c.name for c in kind.counts} <= {c.name for c in COUNTS}
    assert len(figure_names()) == len(set(figure_names())), "two types declare one figure name"


def test_minutes_in_a_state_run_until_the_key_is_reported_again() -> None:
    rollups = HomeRollups("h1", None, retention_us=3600 * 1_000_000)
    readings = [
        Reading("t1", 1, T0 + 30_000_000, states={"hvac_action": "heating"}),
        Reading("t1", 2, T0 + 3 * MINUTE_US, states={"hvac_action": "idle"}),
        Reading("t1", 3, T0 + 4 * MINUTE_US, metrics={"ambient_c": 20.0}),
    ]
    out = records(rollups, readings, 0)
    window = out["device:t1:15m:2025-11-20T10:00:00Z"]
    assert math.isclose(window["heating_minutes"], 2.5)  # type: ignore[arg-type]
    assert window["cooling_minutes"] == 0
    assert window["readings"] == 3
    assert set(figure_names()) <= set(window)


def test_an_open_state_is_credited_up_to_the_watermark() -> None:
    rollups = HomeRollups("h1", None, retention_us=3600 * 1_000_000)
    records(rollups, [Reading("t1", 1, T0, states={"hvac_action": "cooling"})], 0)
    out = records(
        rollups, [Reading("t1", 2, T0 + 5 * MINUTE_US, metrics={"ambient_c": 22.0})], T0 + 4 * MINUTE_US
    )
    assert math.isclose(out["home:h1:15m:2025-11-20T10:00:00Z"]["cooling_minutes"], 4.0)  # type: ignore[arg-type]


def test_state_counts_count_readings_at_their_values() -> None:
    rollups = HomeRollups("h1", None, retention_us=3600 * 1_000_000)
    states = ("locked", "unlocked", "jammed", "locking", "locked")
    readings = [Reading("l1", n, T0 + n * 1_000_000, states={"lock_state": s}) for n, s in enumerate(states)]
    window = records(rollups, readings, 0)["device:l1:1m:2025-11-20T10:00:00Z"]
    assert (window["locks"], window["unlocks"], window["lock_operations"], window["jams"]) == (2, 1, 3, 1)


def test_a_state_checkpointed_in_the_fixed_layout_is_read_on() -> None:
    wkey = f"device|15m|{T0}|t1"
    old = {"w": {wkey: [3, 1, 0, 2 * MINUTE_US, 0, 1, 1, 0, {"ambient_c": [1, 20.0, 20.0, 20.0]}]},
           "hvac": {"t1": ["heating", T0 + 2 * MINUTE_US]}}  # fmt: skip
    rollups = HomeRollups("h1", old, retention_us=3600 * 1_000_000)
    out = records(rollups, [Reading("t1", 9, T0 + 3 * MINUTE_US, states={"hvac_action": "idle"})], 0)
    window = out["device:t1:15m:2025-11-20T10:00:00Z"]
    assert math.isclose(window["heating_minutes"], 3.0)  # type: ignore[arg-type]
    assert (window["readings"], window["late_events"], window["locks"], window["lock_operations"]) == (
        4,
        1,
        1,
        2,
    )
    assert window["metrics"] == {"ambient_c": {"count": 1, "mean": 20.0, "min": 20.0, "max": 20.0}}
