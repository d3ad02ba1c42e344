"""Scoring telemetry against the latest anomaly model (pure; the device actor calls it per reading).

The model is a z-score baseline: for each metric, the mean and standard deviation of readings by hour
of day, per device where a device has enough history, else per device type, else for all hours. Why:
it is cheap to score (a few dict lookups per reading, so it keeps up with the actor's hot path), it is
trained from sufficient statistics that Spark computes in one pass and that merge across micro-batches
and restarts, it explains itself (a reading is "N standard deviations from this device's usual at this
hour"), and it catches what the simulator's faults produce: a sensor drifting away from its baseline.
A baseline's std is never taken below its key's ``StateKey.min_std`` (about the sensor's accuracy): a
baseline learnt from a flat stretch (a few minutes of a humidity that wandered 0.1 %) would otherwise make
the next ordinary wobble an anomaly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from hearth_shared.domain.change import Change
from hearth_shared.domain.registry import DEVICE_TYPES, scored_keys, scored_metrics
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import (
    JSON,
    AnomalyDetected,
    AnomalyDetectedPayload,
    AnomalyModel,
    Baseline,
    ReportState,
)

# The keys scored, over every type: those a type declares with a baseline (its module says why).
SCORED_METRICS = tuple(dict.fromkeys(m for name in DEVICE_TYPES for m in scored_metrics(name)))
_NO_SLICES: dict[str, dict[str, Baseline]] = {}

# Until the analytics job publishes a model: wide, type-level baselines, as each type declares them.
DEFAULT_MODEL = AnomalyModel(
    version=0,
    trained_at=datetime(2026, 1, 1, tzinfo=UTC),
    trained_on=0,
    threshold=4.0,
    min_count=1,
    by_type={
        kind.name: {k.name: {"*": Baseline(1, *k.baseline)} for k in kind.state if k.baseline is not None}
        for kind in DEVICE_TYPES.values()
        if any(k.baseline is not None for k in kind.state)
    },
)


@dataclass(frozen=True, slots=True)
class Score:
    metric: str
    value: float
    score: float
    threshold: float
    model_version: int


def _baseline(slices: dict[str, Baseline] | None, hour: int, min_count: int) -> Baseline | None:
    if not slices:
        return None
    for key in (str(hour), "*"):
        found = slices.get(key)
        if found is not None and found.n >= min_count:
            return found
    return None


def score_reading(
    model: AnomalyModel, *, device_type: str, device_id: str, reading: JSON, hour: int
) -> list[Score]:
    """The anomalies in one reading: metrics whose z-score is above the model's threshold."""
    found: list[Score] = []
    for key in scored_keys(device_type):
        metric = key.name
        value = reading.get(metric)
        if value is None or value is True or value is False or not isinstance(value, (int, float)):
            continue
        baseline = _baseline(
            model.by_device.get(device_id, _NO_SLICES).get(metric), hour, model.min_count
        ) or _baseline(model.by_type.get(device_type, _NO_SLICES).get(metric), hour, model.min_count)
        if baseline is None:
            continue
        z = abs(value - baseline.mean) / max(baseline.std, key.min_std)
        if z > model.threshold:
            found.append(Score(metric, float(value), round(z, 3), model.threshold, model.version))
    return found


def detect_anomalies(twin: Twin, request: ReportState, model: AnomalyModel) -> list[Change]:
    """Anomaly facts for a device's reading (call it only for a report the twin accepted)."""
    scores = score_reading(
        model,
        device_type=twin.device_type,
        device_id=twin.device_id,
        reading=request.state,
        hour=request.device_time.hour,
    )
    return [
        Change(
            AnomalyDetected,
            AnomalyDetectedPayload(
                metric=s.metric,
                value=s.value,
                score=s.score,
                threshold=s.threshold,
                model_version=s.model_version,
                device_time=request.device_time,
            ),
        )
        for s in scores
    ]
