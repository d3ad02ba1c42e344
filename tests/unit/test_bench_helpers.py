"""The benches' pure helpers (no timing here: figures come from `hearth bench`, never from tests)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from hearth_bench.benches.batch_replay import CountingFacts
from hearth_bench.benches.loop import Reading, Seen, first_drifting_reading
from hearth_bench.benches.streaming import rollup_cap_note
from hearth_bench.figures.results import ratio_rows
from hearth_devstack.workload.journal_facts import JournalFacts
from hearth_shared.schema.events import AnomalyModel, Baseline, StateReported

pytestmark = pytest.mark.unit


def test_counting_facts_counts_the_telemetry_it_hands_out() -> None:
    facts = CountingFacts(iter(JournalFacts(20)))
    taken = list(itertools.islice(facts, 2_000))
    assert facts.total == 2_000
    assert facts.telemetry == sum(isinstance(e, StateReported) for e in taken)
    assert 0.9 < facts.telemetry / facts.total < 1.0


def _model(version: int, mean: float) -> AnomalyModel:
    return AnomalyModel(
        version=version,
        trained_at=datetime(2026, 11, 1, tzinfo=UTC),
        trained_on=100,
        threshold=4.0,
        min_count=30,
        by_device={"t1": {"ambient_c": {"*": Baseline(100, mean, 0.05)}}},
    )


def test_the_first_drifting_reading_is_the_first_the_model_in_force_flags() -> None:
    seen = Seen(models=[(100.0, _model(1, 20.0)), (200.0, _model(2, 25.0))])
    seen.readings["t1"] = [
        Reading(device_time=149.0, recorded_at=149.0, ambient_c=30.0, hour=3),  # before the switch
        Reading(device_time=151.0, recorded_at=151.0, ambient_c=20.5, hour=3),  # within 4 x 0.25 degC
        Reading(device_time=152.0, recorded_at=152.0, ambient_c=21.2, hour=3),  # flagged by v1
        Reading(device_time=153.0, recorded_at=153.0, ambient_c=21.5, hour=3),
    ]
    found = first_drifting_reading(seen, "t1", switch=150.0)
    assert found is not None
    reading, model = found
    assert (reading.device_time, model.version) == (152.0, 1)
    assert seen.trained("t1", 30) == (100.0, seen.models[0][1])
    assert seen.trained("t1", 1_000) is None


def test_the_rollup_intake_limit_is_named_only_when_it_binds() -> None:
    row = {"rate/s": 16_000, "query": "hearth-rollups", "input rows/s": 10_050, "processed rows/s": 25_000,
           "batch p50 ms": 3_500.0, "keeps up": "no"}  # fmt: skip
    assert "100,000 records per micro-batch" in rollup_cap_note([row], 100_000, 10.0)
    assert rollup_cap_note([{**row, "input rows/s": 6_000}], 100_000, 10.0) == ""
    assert rollup_cap_note([{**row, "keeps up": "yes"}], 100_000, 10.0) == ""


def test_ratio_rows_give_each_rate_and_its_ratio_to_the_floor() -> None:
    rows = ratio_rows("events/s", ("floor", 200_000.0), ("worker", 35_035.4), ("idle agent", 9_267.0))
    assert rows == [
        {"path": "floor", "events/s": 200_000, "ratio": 1.0},
        {"path": "worker", "events/s": 35_035, "ratio": 0.175},
        {"path": "idle agent", "events/s": 9_267, "ratio": 0.046},
    ]
