"""The anomaly scorer (``hearth_shared.domain.anomaly.score_reading``): a baseline's spread is never taken
below its key's ``min_std``, so a baseline learnt from a flat stretch does not flag the next wobble."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from hearth_shared.domain.anomaly import score_reading
from hearth_shared.domain.thermostat import TYPE
from hearth_shared.schema.events import AnomalyModel, Baseline

pytestmark = pytest.mark.unit

MIN_STD = {k.name: k.min_std for k in TYPE.state}

# Baselines as a few flat minutes give them: 0.05 of spread, far below either sensor's accuracy.
MODEL = AnomalyModel(
    version=7,
    trained_at=datetime(2026, 11, 1, tzinfo=UTC),
    trained_on=40,
    threshold=4.0,
    min_count=8,
    by_device={
        "t1": {"ambient_c": {"*": Baseline(20, 21.0, 0.05)}, "humidity_pct": {"*": Baseline(20, 45.0, 0.05)}}
    },
)


def scored(**reading: float) -> dict[str, float]:
    found = score_reading(MODEL, device_type="thermostat", device_id="t1", reading=reading, hour=3)
    assert all(s.model_version == 7 and s.threshold == 4.0 for s in found)
    return {s.metric: s.score for s in found}


def test_each_scored_key_declares_its_floor() -> None:
    assert MIN_STD["ambient_c"] == 0.25
    assert MIN_STD["humidity_pct"] == 2.0


def test_a_reading_is_scored_against_the_keys_floor_not_the_flat_baselines_spread() -> None:
    # 1.5 % of humidity is 30 of the baseline's stds, but under one of the hygrometer's floor (2 %).
    assert scored(ambient_c=21.0, humidity_pct=46.5) == {}
    # 0.9 degC is under 4 floors of 0.25; 1.2 degC is above.
    assert scored(ambient_c=21.9) == {}
    assert scored(ambient_c=22.2) == {"ambient_c": 4.8}
    # 9 % of humidity is 4.5 floors.
    assert scored(ambient_c=21.0, humidity_pct=54.0) == {"humidity_pct": 4.5}


def test_a_baseline_wider_than_the_floor_is_used_as_it_is() -> None:
    wide = msgspec.structs.replace(MODEL, by_device={"t1": {"humidity_pct": {"*": Baseline(20, 45.0, 5.0)}}})
    found = score_reading(
        wide, device_type="thermostat", device_id="t1", reading={"humidity_pct": 66.0}, hour=3
    )
    assert [(s.metric, s.score) for s in found] == [("humidity_pct", 4.2)]
