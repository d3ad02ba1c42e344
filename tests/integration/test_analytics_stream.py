"""The streaming job on a real broker and a real Spark: rollups checked against pandas (late events
included), a restart from the checkpoint after a crash (nothing lost, nothing counted twice), and the
streaming trainer's model on the models topic."""

from __future__ import annotations

import json
import math
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hearth_analytics.jobs.stream import run_stream
from hearth_analytics.rules.rollups import figure_names
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.schema import read_topic
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import (
    DeviceRegistered,
    DeviceRegisteredPayload,
    Event,
    StateReported,
    StateReportedPayload,
    decode_model,
)
from tests.support.topics import produce_facts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
WINDOWS = {"1m": 60, "15m": 900}
METRICS = ("ambient_c", "humidity_pct", "battery_pct")


class History:
    """Journal facts for a few devices, numbered per device like the device actor does."""

    def __init__(self) -> None:
        self.versions: dict[str, int] = defaultdict(int)
        self.readings: list[dict[str, Any]] = []  # what the expectations are computed from
        self.batch = 0

    def _fact(
        self, cls: type[DeviceRegistered | StateReported], payload: Any, device: str, home: str, t: datetime
    ) -> Event:
        self.versions[device] += 1
        return cls(
            event_id=uuid.uuid4(), device_id=device, home_id=home, version=self.versions[device],
            occurred_at=t, recorded_at=t, payload=payload,
        )  # fmt: skip

    def register(self, device: str, home: str, device_type: str) -> Event:
        payload = DeviceRegisteredPayload(device_type=device_type, name=device)
        return self._fact(DeviceRegistered, payload, device, home, T0 - timedelta(hours=1))

    def report(self, device: str, home: str, t: datetime, **reported: Any) -> Event:
        fact = self._fact(
            StateReported,
            StateReportedPayload(reported=reported, device_seq=self.versions[device] + 1, device_time=t),
            device, home, t,
        )  # fmt: skip
        self.readings.append(
            {"home_id": home, "device_id": device, "version": fact.version, "t": pd.Timestamp(t),
             "batch": self.batch, **reported}
        )  # fmt: skip
        return fact


def latest_records(spark: Any, settings: AnalyticsSettings, topic: str) -> tuple[dict[str, Any], int]:
    """The newest value of every key on a topic, and how many records the topic holds."""
    rows = (
        read_topic(spark, settings, topic)
        .selectExpr("cast(key as string) k", "cast(value as string) v", "partition", "offset")
        .collect()
    )
    latest: dict[str, tuple[int, int, str]] = {}
    for r in rows:
        if r.k not in latest or (r.partition, r.offset) > latest[r.k][:2]:
            latest[r.k] = (r.partition, r.offset, r.v)
    return {k: json.loads(v) for k, (_p, _o, v) in latest.items()}, len(rows)


# ------------------------------------------------------------------------------ pandas recomputation


def iso(t: pd.Timestamp) -> str:
    return str(t.strftime("%Y-%m-%dT%H:%M:%SZ"))


def expected_rollups(  # noqa: C901  (the oracle, written straight from the spec: one pass per figure)
    readings: pd.DataFrame, watermarks: dict[int, pd.Timestamp]
) -> dict[str, dict[str, Any]]:
    """The rollups the job should publish, recomputed with pandas from the same readings.

    A reading is late when its event time is older than the watermark of the micro-batch that read it;
    late readings are only counted (``late_events``). Heating/cooling: from an on-time reading reporting
    heating/cooling to the device's next one reporting ``hvac_action``, the last one up to the watermark
    of the home's last micro-batch.
    """
    df = readings.copy()
    for column in (*METRICS, "hvac_action", "lock_state"):
        if column not in df:
            df[column] = None
    df["wm"] = df["batch"].map(watermarks)
    df["late"] = df["t"] < df["wm"]
    figures: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"readings": 0, "late_events": 0, "locks": 0, "unlocks": 0, "jams": 0, "metrics": {},
                 "heating_minutes": 0.0, "cooling_minutes": 0.0}
    )  # fmt: skip

    def keys_of(row: Any, t: pd.Timestamp) -> list[str]:
        return [
            f"{scope}:{sid}:{label}:{iso(t.floor(f'{secs}s'))}"
            for scope, sid in (("device", row.device_id), ("home", row.home_id))
            for label, secs in WINDOWS.items()
        ]

    for row in df.itertuples():
        for key in keys_of(row, row.t):
            fig = figures[key]
            if row.late:
                fig["late_events"] += 1
                continue
            fig["readings"] += 1
            fig["locks"] += row.lock_state == "locked"
            fig["unlocks"] += row.lock_state == "unlocked"
            fig["jams"] += row.lock_state == "jammed"
    on_time = df[~df["late"]]
    for scope, id_column in (("device", "device_id"), ("home", "home_id")):
        for label, secs in WINDOWS.items():
            framed = on_time.assign(start=on_time["t"].dt.floor(f"{secs}s"))
            for metric in METRICS:
                stats = framed.dropna(subset=[metric]).groupby([id_column, "start"])[metric]
                for (sid, start), s in stats:
                    figures[f"{scope}:{sid}:{label}:{iso(start)}"]["metrics"][metric] = {
                        "count": len(s), "mean": s.mean(), "min": s.min(), "max": s.max()
                    }  # fmt: skip
    last_wm = df.groupby("home_id")["wm"].max()
    for (home, device), changes in on_time.dropna(subset=["hvac_action"]).groupby(["home_id", "device_id"]):
        changes = changes.sort_values(["t", "version"])
        ends = [*changes["t"].iloc[1:], last_wm[home]]
        for start, end, action in zip(changes["t"], ends, changes["hvac_action"], strict=True):
            if action not in ("heating", "cooling") or end <= start:
                continue
            for scope, sid in (("device", device), ("home", home)):
                for label, secs in WINDOWS.items():
                    window = start.floor(f"{secs}s")
                    while window < end:
                        overlap = min(end, window + pd.Timedelta(seconds=secs)) - max(start, window)
                        figures[f"{scope}:{sid}:{label}:{iso(window)}"][f"{action}_minutes"] += (
                            overlap.total_seconds() / 60
                        )
                        window += pd.Timedelta(seconds=secs)
    return dict(figures)


def assert_rollups_match(actual: dict[str, Any], expected: dict[str, dict[str, Any]]) -> None:
    assert sorted(actual) == sorted(expected)
    for key, want in expected.items():
        got = actual[key]
        for field in ("readings", "late_events", "locks", "unlocks", "jams"):
            assert got[field] == want[field], (key, field, got, want)
        assert got["lock_operations"] == want["locks"] + want["unlocks"], key
        assert got["late_expired"] == 0, key
        for field in ("heating_minutes", "cooling_minutes"):
            assert math.isclose(got[field], want[field], abs_tol=1e-9), (key, field, got[field], want[field])
        assert sorted(got["metrics"]) == sorted(want["metrics"]), (key, got["metrics"], want["metrics"])
        for metric, stats in want["metrics"].items():
            assert got["metrics"][metric]["count"] == stats["count"], (key, metric)
            for stat in ("mean", "min", "max"):
                assert math.isclose(got["metrics"][metric][stat], stats[stat], rel_tol=1e-12), (
                    key,
                    metric,
                    stat,
                )


def settings_for(stack: StackSettings, tmp_path: Path, **overrides: Any) -> AnalyticsSettings:
    return AnalyticsSettings(
        stack=stack, checkpoint_dir=tmp_path / "checkpoints", output_dir=tmp_path / "reports", **overrides
    )


def watermark_after(readings: pd.DataFrame, batch: int, lateness_s: int) -> pd.Timestamp:
    return readings[readings["batch"] < batch]["t"].max() - pd.Timedelta(seconds=lateness_s)


# ------------------------------------------------------------------------------------------------ tests


async def test_rollups_equal_a_pandas_recomputation_including_late_events(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    settings = settings_for(stack, tmp_path, allowed_lateness_s=120)
    h = History()

    def at(m: int, s: int = 0) -> datetime:
        return T0 + timedelta(minutes=m, seconds=s)

    facts = [
        h.register("t1", "h1", "thermostat"),
        h.register("l1", "h1", "lock"),
        h.register("t2", "h2", "thermostat"),
    ]
    # Micro-batch 0 (watermark: none yet): 10:00 to 10:16.
    for i in range(33):  # t1 every 30 s, heating 10:02:10-10:07:40, cooling 10:12:05-10:14:00
        t = at(0, 30 * i)
        extra = {"humidity_pct": 40.0 + i % 5} if i % 3 == 0 else {}
        facts.append(h.report("t1", "h1", t, ambient_c=round(19.5 + 0.07 * i, 2), **extra))
    for t, action in [(at(2, 10), "heating"), (at(7, 40), "idle"), (at(12, 5), "cooling"), (at(14), "off")]:
        facts.append(h.report("t1", "h1", t, hvac_action=action))
    for t, state in [(at(3), "unlocked"), (at(3, 30), "locked"), (at(9), "unlocked"), (at(9, 10), "jammed"),
                     (at(10), "locked")]:  # fmt: skip
        facts.append(h.report("l1", "h1", t, lock_state=state, battery_pct=80.0 - t.minute / 10))
    facts.append(h.report("t2", "h2", at(1), hvac_action="heating", ambient_c=17.0))
    for i in range(1, 21):  # t2 every 45 s, heating from 10:01 on (still heating at the end)
        facts.append(h.report("t2", "h2", at(1, 45 * i), ambient_c=17.0 + 0.1 * i))
    await produce_facts(stack, facts)
    run_stream(settings, once=True, spark=spark, queries=("rollups",))

    # Micro-batch 1: the watermark is 10:16:00 - 2 min = 10:14:00. On-time readings up to 10:22, one
    # out of order but on time (10:14:10), and late ones (before 10:14:00), which only count.
    h.batch = 1
    facts = [h.report("t1", "h1", at(14, 10), ambient_c=20.0)]
    facts += [h.report("t1", "h1", at(16, 30 * i), ambient_c=21.0 + 0.1 * i) for i in range(1, 13)]
    facts += [
        h.report("t1", "h1", at(18, 5), hvac_action="heating"),
        h.report("t1", "h1", at(20), hvac_action="idle"),
    ]
    facts += [h.report("t2", "h2", at(16, 45 * i), ambient_c=19.0 + 0.1 * i) for i in range(1, 8)]
    facts += [h.report("l1", "h1", at(21), lock_state="unlocked")]
    late = [
        h.report("t1", "h1", at(5, 15), ambient_c=30.0),  # late for its 1- and 15-minute windows
        h.report("t2", "h2", at(13, 50), ambient_c=30.0),  # late, though its 15-minute window is open
        h.report("t2", "h2", at(12), hvac_action="idle"),  # a late change moves no heating minutes
        h.report("l1", "h1", at(11), lock_state="locked"),
    ]
    await produce_facts(stack, facts + late)
    run_stream(settings, once=True, spark=spark, queries=("rollups",))

    readings = pd.DataFrame(h.readings)
    watermarks = {0: pd.Timestamp(0, tz=UTC), 1: watermark_after(readings, 1, 120)}
    assert watermarks[1] == pd.Timestamp(at(14))
    expected = expected_rollups(readings, watermarks)
    actual, _count = latest_records(spark, settings, stack.topics.rollups)
    assert_rollups_match(actual, expected)

    # Spot checks of the figures and of the record format, worked out by hand.
    t1_heat = actual[f"device:t1:15m:{iso(pd.Timestamp(at(0)))}"]
    assert math.isclose(t1_heat["heating_minutes"], 5.5) and math.isclose(
        t1_heat["cooling_minutes"], 1 + 55 / 60
    )
    assert t1_heat["late_events"] == 1
    # t2 heats from 10:01 on; the late "idle" changes nothing, and an open interval is credited up to
    # the watermark (10:14) only: a change at or after it may still arrive.
    t2_first = actual["home:h2:15m:2026-11-20T10:00:00Z"]
    assert math.isclose(t2_first["heating_minutes"], 13.0)
    assert t2_first["late_events"] == 2
    assert actual["home:h2:15m:2026-11-20T10:15:00Z"]["heating_minutes"] == 0.0
    lock = actual["device:l1:15m:2026-11-20T10:00:00Z"]
    assert (lock["locks"], lock["unlocks"], lock["jams"], lock["lock_operations"]) == (2, 2, 1, 4)
    assert lock["late_events"] == 1
    assert actual["device:t1:1m:2026-11-20T10:05:00Z"] == {
        "schema_version": 1, "scope": "device", "home_id": "h1", "device_id": "t1", "window": "1m",
        "window_start": "2026-11-20T10:05:00Z", "window_end": "2026-11-20T10:06:00Z", "readings": 2,
        "metrics": {"ambient_c": {"count": 2, "mean": pytest.approx(20.235), "min": 20.2, "max": 20.27}},
        **dict.fromkeys(figure_names(), 0),  # every type's minutes and counts, 0 unless said here
        "heating_minutes": 1.0, "late_events": 1, "late_expired": 0,
    }  # fmt: skip


async def test_restart_after_a_crash_loses_nothing_and_counts_nothing_twice(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    # Several micro-batches per run; a watermark far behind so no reading is ever late whatever the
    # batches hold (partitions are read in parallel), which keeps the expectation exact.
    settings = settings_for(
        stack, tmp_path, allowed_lateness_s=6 * 3600, model_min_count=1,
        rollup_max_offsets_per_trigger=150, train_max_offsets_per_trigger=150,
    )  # fmt: skip
    h = History()
    devices = [("t1", "h1"), ("t2", "h1"), ("t3", "h2")]
    facts: list[Event] = [h.register(d, home, "thermostat") for d, home in devices]
    for i in range(120):  # every 15 s, 10:00-10:15 and 11:30-11:45; heating cycles on t1 and t3
        t = T0 + timedelta(minutes=30 * (i // 60), seconds=15 * (i % 60)) + timedelta(hours=i // 60)
        for k, (device, home) in enumerate(devices):
            reported: dict[str, Any] = {"ambient_c": round(18 + k + ((i * 7 + k) % 11) / 10, 2)}
            if i % 4 == k:
                reported["humidity_pct"] = 35.0 + (i + 3 * k) % 9
            if device != "t2" and i % 20 in (5, 12):
                reported["hvac_action"] = "heating" if i % 20 == 5 else "idle"
            facts.append(h.report(device, home, t, **reported))
    first, second = facts[: 3 + 240], facts[3 + 240 :]
    await produce_facts(stack, first)
    run_stream(settings, once=True, spark=spark)

    # A crash after the last micro-batch wrote its output but before Spark committed it: on restart
    # Spark runs that micro-batch again (same offsets, same state); the trainer must not count it twice.
    for query in ("rollups", "training"):
        commits = sorted((settings.checkpoint(query) / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
        assert len(commits) >= 2, f"{query}: expected several micro-batches, got {len(commits)}"
        commits[-1].unlink()
        for crc in commits[-1].parent.glob(f".{commits[-1].name}.crc"):
            crc.unlink()
    published_before = len(latest_records(spark, settings, stack.topics.models)[0])
    assert published_before == 1

    h.batch = 1
    await produce_facts(stack, second)
    run_stream(settings, once=True, spark=spark)

    readings = pd.DataFrame(h.readings)
    expected = expected_rollups(readings, {0: pd.Timestamp(0, tz=UTC), 1: pd.Timestamp(0, tz=UTC)})
    actual, _ = latest_records(spark, settings, stack.topics.rollups)
    assert_rollups_match(actual, expected)
    assert sum(v["readings"] for k, v in actual.items() if k.startswith("device:") and ":15m:" in k) == len(
        readings
    )

    # The newest model counts every reading exactly once: baselines equal pandas over all readings.
    models, records = latest_records(spark, settings, stack.topics.models)
    model = decode_model(json.dumps(models["telemetry-anomaly"]))
    assert records >= 3 and model.version == records  # versions 1, 2, 3... one per publication
    assert model.trained_on == len(readings)
    assert model.min_count == 1 and model.threshold == settings.model_threshold
    readings["hour"] = readings["t"].dt.hour.astype(str)
    for metric in ("ambient_c", "humidity_pct"):
        values = readings.dropna(subset=[metric])
        for (device, hour), s in values.groupby(["device_id", "hour"])[metric]:
            got = model.by_device[device][metric][hour]
            assert got.n == len(s)
            assert got.mean == pytest.approx(s.mean(), abs=1e-6)
            assert got.std == pytest.approx(s.std(ddof=0), abs=1e-6)
        overall = model.by_type["thermostat"][metric]["*"]
        assert overall.n == len(values)
        assert overall.mean == pytest.approx(values[metric].mean(), abs=1e-6)
        assert overall.std == pytest.approx(values[metric].std(ddof=0), abs=1e-6)
