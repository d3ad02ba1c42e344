"""Batch jobs over the whole journal on a real broker and a real Spark: the daily report's figures for a
known history (exact), its charts and summary, and the full retrain published to the models topic."""

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
from rich.console import Console

from hearth_analytics.batch import build_report, print_summary
from hearth_analytics.schema import read_topic
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.train import run_train
from hearth_shared.events import (
    AnomalyDetected,
    AnomalyDetectedPayload,
    AnomalyModel,
    Baseline,
    CommandAccepted,
    CommandConverged,
    CommandExpired,
    CommandFailed,
    CommandFailedPayload,
    CommandRef,
    CommandRejected,
    CommandRejectedPayload,
    CommandRequested,
    CommandRequestedPayload,
    CommandSuperseded,
    CommandSupersededPayload,
    DeviceRegistered,
    DeviceRegisteredPayload,
    Event,
    StateReported,
    StateReportedPayload,
    decode_model,
    encode,
)
from hearth_shared.settings import StackSettings
from tests.journal import produce, produce_facts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DAY1, DAY2 = datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 11, 21, tzinfo=UTC)


def at(day: datetime, hh: int, mm: int = 0, ss: int = 0) -> datetime:
    return day + timedelta(hours=hh, minutes=mm, seconds=ss)


class Journal:
    def __init__(self) -> None:
        self.versions: dict[str, int] = defaultdict(int)
        self.facts: list[Event] = []

    def add(
        self, cls: type[Event], payload: Any, device: str, home: str, t: datetime, cid: Any = None
    ) -> None:
        self.versions[device] += 1
        self.facts.append(
            cls(event_id=uuid.uuid4(), device_id=device, home_id=home, version=self.versions[device],
                occurred_at=t, recorded_at=t, correlation_id=cid, payload=payload)
        )  # fmt: skip

    def register(self, device: str, home: str, device_type: str) -> None:
        payload = DeviceRegisteredPayload(device_type=device_type, name=device)
        self.add(DeviceRegistered, payload, device, home, at(DAY1, 0))

    def report(self, device: str, home: str, t: datetime, **reported: Any) -> None:
        payload = StateReportedPayload(reported=reported, device_seq=self.versions[device] + 1, device_time=t)
        self.add(StateReported, payload, device, home, t)

    def command(self, device: str, home: str, t: datetime, outcome: str | None) -> None:
        cid = uuid.uuid4()
        requested = CommandRequestedPayload(
            command_id=cid, name="lock", params={}, expires_at=t + timedelta(minutes=5)
        )
        self.add(CommandRequested, requested, device, home, t, cid)
        if outcome == "rejected":
            refused = CommandRejectedPayload(command_id=cid, reason="door_open", message="open")
            self.add(CommandRejected, refused, device, home, t, cid)
            return
        self.add(CommandAccepted, CommandRef(command_id=cid), device, home, t, cid)
        later = t + timedelta(seconds=20)
        if outcome == "converged":
            self.add(CommandConverged, CommandRef(command_id=cid), device, home, later, cid)
        elif outcome == "failed":
            failed = CommandFailedPayload(command_id=cid, reason="device_jammed")
            self.add(CommandFailed, failed, device, home, later, cid)
        elif outcome == "expired":
            self.add(CommandExpired, CommandRef(command_id=cid), device, home, later, cid)
        elif outcome == "superseded":
            payload = CommandSupersededPayload(command_id=cid, superseded_by=uuid.uuid4())
            self.add(CommandSuperseded, payload, device, home, later, cid)
            self.add(
                CommandExpired, CommandRef(command_id=cid), device, home, later + timedelta(minutes=5), cid
            )

    def anomaly(self, device: str, home: str, t: datetime) -> None:
        payload = AnomalyDetectedPayload(
            metric="ambient_c", value=35.0, score=6.2, threshold=4.0, model_version=3, device_time=t
        )
        self.add(AnomalyDetected, payload, device, home, t + timedelta(seconds=1))


def known_history() -> Journal:
    j = Journal()
    j.register("t1", "h1", "thermostat")
    j.register("l1", "h1", "lock")
    j.register("t2", "h2", "thermostat")  # x9 (home h2) never registered: device_type "unknown"
    # t1: heats 22:30 -> 00:30 (90 min on day 1, 30 on day 2), cools 12:00 -> its last reading at 12:45.
    j.report("t1", "h1", at(DAY1, 22), ambient_c=20.0, humidity_pct=40.0, hvac_action="idle")
    j.report("t1", "h1", at(DAY1, 22, 30), ambient_c=19.0, hvac_action="heating")
    j.report("t1", "h1", at(DAY1, 23), ambient_c=19.5)
    j.report("t1", "h1", at(DAY2, 0, 30), ambient_c=21.0, hvac_action="idle")
    j.report("t1", "h1", at(DAY2, 12), ambient_c=26.0, hvac_action="cooling")
    j.report("t1", "h1", at(DAY2, 12, 45), ambient_c=24.5)
    # l1 on day 1: 3 locks, 2 unlocks, 1 jam, the door opened once.
    for t, reported in [
        (at(DAY1, 8), {"lock_state": "unlocked", "battery_pct": 90.0}),
        (at(DAY1, 8, 1), {"lock_state": "locked"}),
        (at(DAY1, 18), {"lock_state": "unlocked"}),
        (at(DAY1, 18, 0, 5), {"door": "open"}),
        (at(DAY1, 18, 1), {"door": "closed"}),
        (at(DAY1, 18, 2), {"lock_state": "locked"}),
        (at(DAY1, 21), {"lock_state": "jammed"}),
        (at(DAY1, 21, 5), {"lock_state": "locked", "battery_pct": 89.0}),
    ]:
        j.report("l1", "h1", t, **reported)
    # Commands: l1 day 1 -> converged, failed, rejected; t1 day 2 -> converged, expired, superseded, open.
    for t, outcome in [
        (at(DAY1, 7, 59), "converged"),
        (at(DAY1, 20, 59), "failed"),
        (at(DAY1, 21, 4), "rejected"),
    ]:
        j.command("l1", "h1", t, outcome)
    for t, outcome in [(at(DAY2, 11, 59), "converged"), (at(DAY2, 12, 10), "expired"),
                       (at(DAY2, 12, 20), "superseded"), (at(DAY2, 12, 30), None)]:  # fmt: skip
        j.command("t1", "h1", t, outcome)
    j.anomaly("t1", "h1", at(DAY2, 12))
    j.anomaly("t1", "h1", at(DAY2, 12, 45))
    # h2: t2 cools 10:00 -> 10:20 on day 1 (one anomaly); x9 reports once.
    j.report("t2", "h2", at(DAY1, 10), ambient_c=30.0, hvac_action="cooling")
    j.anomaly("t2", "h2", at(DAY1, 10))
    j.report("t2", "h2", at(DAY1, 10, 20), ambient_c=28.0, hvac_action="idle")
    j.report("x9", "h2", at(DAY1, 10), ambient_c=21.0)
    return j


def row(frame: pd.DataFrame, day: datetime, **keys: str) -> dict[str, Any]:
    match = frame[(pd.to_datetime(frame["day"]) == pd.Timestamp(day.date()))]
    for name, value in keys.items():
        match = match[match[name] == value]
    assert len(match) == 1, (day, keys, match)
    return match.iloc[0].to_dict()


def check(got: dict[str, Any], want: dict[str, Any]) -> None:
    for name, value in want.items():
        if value is None:
            assert got[name] is None or pd.isna(got[name]), (name, got[name])
        elif isinstance(value, float):
            assert math.isclose(got[name], value, rel_tol=1e-12), (name, got[name], value)
        else:
            assert got[name] == value, (name, got[name], value)


NO_COMMANDS = {
    f"commands{s}": 0 for s in ("", "_converged", "_failed", "_rejected", "_expired", "_superseded", "_open")
}


async def test_daily_report_figures_are_exact_for_a_known_history(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    journal = known_history()
    await produce_facts(stack, journal.facts)
    settings = AnalyticsSettings(
        stack=stack, output_dir=tmp_path / "report", checkpoint_dir=tmp_path / "ckpt"
    )

    report = build_report(spark, settings)

    assert report.facts == len(journal.facts)
    devices = pd.read_parquet(report.devices_path)
    homes = pd.read_parquet(report.homes_path)
    assert report.device_days == len(devices) == 5
    assert sorted(zip(devices["home_id"], devices["device_id"], devices["device_type"], strict=True)) == [
        ("h1", "l1", "lock"), ("h1", "t1", "thermostat"), ("h1", "t1", "thermostat"),
        ("h2", "t2", "thermostat"), ("h2", "x9", "unknown"),
    ]  # fmt: skip
    check(row(devices, DAY1, device_id="t1"), {
        "readings": 3, "ambient_c_mean": 19.5, "ambient_c_min": 19.0, "ambient_c_max": 20.0,
        "ambient_c_count": 3, "humidity_pct_mean": 40.0, "humidity_pct_count": 1, "heating_minutes": 90.0,
        "cooling_minutes": 0.0, "heating_cycles": 1, "cooling_cycles": 0, "anomalies": 0, **NO_COMMANDS,
        "command_success_rate": None,
    })  # fmt: skip
    check(row(devices, DAY2, device_id="t1"), {
        "readings": 3, "ambient_c_mean": (21.0 + 26.0 + 24.5) / 3, "ambient_c_min": 21.0,
        "ambient_c_max": 26.0, "heating_minutes": 30.0, "cooling_minutes": 45.0, "heating_cycles": 0,
        "cooling_cycles": 1, "anomalies": 2, "commands": 4, "commands_converged": 1, "commands_expired": 1,
        "commands_superseded": 1, "commands_open": 1, "commands_failed": 0, "commands_rejected": 0,
        "command_success_rate": 0.5, "locks": 0, "unlocks": 0, "jams": 0,
    })  # fmt: skip
    check(row(devices, DAY1, device_id="l1"), {
        "readings": 8, "locks": 3, "unlocks": 2, "jams": 1, "door_opens": 1, "battery_pct_min": 89.0,
        "battery_pct_count": 2, "ambient_c_count": 0, "ambient_c_mean": None, "heating_minutes": 0.0,
        "commands": 3, "commands_converged": 1, "commands_failed": 1, "commands_rejected": 1,
        "commands_open": 0, "command_success_rate": 1 / 3,
    })  # fmt: skip
    check(row(devices, DAY1, device_id="t2"), {
        "readings": 2, "cooling_minutes": 20.0, "cooling_cycles": 1, "heating_minutes": 0.0, "anomalies": 1,
        "ambient_c_mean": 29.0,
    })  # fmt: skip
    check(row(devices, DAY1, device_id="x9"), {"readings": 1, "ambient_c_mean": 21.0, **NO_COMMANDS})

    assert len(homes) == 3
    check(row(homes, DAY1, home_id="h1"), {
        "devices": 2, "readings": 11, "heating_minutes": 90.0, "cooling_minutes": 0.0, "locks": 3,
        "unlocks": 2, "jams": 1, "anomalies": 0, "commands": 3, "command_success_rate": 1 / 3,
        "ambient_c_mean": 19.5, "battery_pct_min": 89.0,
    })  # fmt: skip
    check(row(homes, DAY2, home_id="h1"), {
        "devices": 1, "readings": 3, "heating_minutes": 30.0, "cooling_minutes": 45.0, "anomalies": 2,
        "commands": 4, "command_success_rate": 0.5,
    })  # fmt: skip
    check(row(homes, DAY1, home_id="h2"), {
        "devices": 2, "readings": 3, "cooling_minutes": 20.0, "anomalies": 1, "commands": 0,
        "command_success_rate": None, "ambient_c_mean": (30.0 + 28.0 + 21.0) / 3, "ambient_c_max": 30.0,
    })  # fmt: skip

    names = sorted(p.name for p in report.charts)
    assert names == sorted(["hvac.png", "temperature.png", "locks.png", "commands.png", "anomalies.png",
                            "top_homes.png", "overview.png"])  # fmt: skip
    for chart in report.charts:
        data = chart.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, chart

    console = Console(record=True, width=160)
    print_summary(report, console)
    text = console.export_text()
    assert "2026-11-20 to 2026-11-21" in text and "h1" in text and "h2" in text
    assert "40%" in text  # h1: 2 converged of 5 decided commands


async def test_full_retrain_publishes_a_new_model_version_that_decodes(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    settings = AnalyticsSettings(stack=stack, checkpoint_dir=tmp_path / "ckpt", model_min_count=5,
                                 model_threshold=3.5)  # fmt: skip
    older = AnomalyModel(version=4, trained_at=DAY1, trained_on=1, threshold=4.0, min_count=1,
                         by_type={"thermostat": {"ambient_c": {"*": Baseline(1, 20.0, 1.0)}}})  # fmt: skip
    await produce(stack.kafka_bootstrap_servers, stack.topics.models, [(older.name.encode(), encode(older))])
    j = Journal()
    j.register("t1", "h1", "thermostat")
    j.register("t2", "h1", "thermostat")
    for i in range(12):  # t1: 6 readings at 09:xx, 6 at 10:xx; t2: 12 at 10:xx; humidity on even ones
        humidity = {"humidity_pct": 40.0} if i % 2 == 0 else {}
        j.report("t1", "h1", at(DAY1, 9 + i // 6, i), ambient_c=20.0 + i, **humidity)
        j.report("t2", "h1", at(DAY1, 10, i), ambient_c=18.0 + i % 3)
    j.report("x9", "h2", at(DAY1, 10), ambient_c=50.0)  # never registered: by_device only (if enough)
    await produce_facts(stack, j.facts)

    model = run_train(settings, spark=spark)

    records = read_topic(spark, settings, stack.topics.models).selectExpr("cast(value as string) v").collect()
    assert len(records) == 2
    published = decode_model(records[-1].v)
    assert published == decode_model(json.dumps(json.loads(encode(model))))
    assert (published.name, published.version) == ("telemetry-anomaly", 5)
    assert published.trained_on == 25 and published.min_count == 5 and published.threshold == 3.5
    t1 = published.by_device["t1"]["ambient_c"]
    assert t1["9"] == Baseline(6, 22.5, round(pd.Series(range(20, 26)).std(ddof=0), 6))
    assert t1["10"] == Baseline(6, 28.5, round(pd.Series(range(26, 32)).std(ddof=0), 6))
    assert t1["*"].n == 12 and t1["*"].mean == 25.5
    assert published.by_device["t1"]["humidity_pct"] == {"*": Baseline(6, 40.0, 0.0)}  # 3 + 3 < 5 per hour
    assert "x9" not in published.by_device  # one reading: below min_count
    thermostat = published.by_type["thermostat"]["ambient_c"]
    at10 = pd.Series([*range(26, 32), *(18 + i % 3 for i in range(12))], dtype="float64")
    assert thermostat["10"] == Baseline(18, round(at10.mean(), 6), round(at10.std(ddof=0), 6))
    assert thermostat["*"].n == 24
    assert set(published.by_type) == {"thermostat"}
