"""Batch jobs over the whole journal on a real broker and a real Spark: the daily report's figures for a
known history (exact), its charts and summary, and the full retrain published to the models topic."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from rich.console import Console

from hearth_analytics.jobs.batch import build_report, print_summary
from hearth_analytics.jobs.train import run_train
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.schema import read_topic
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import (
    AnomalyModel,
    Baseline,
    decode_model,
    encode,
)
from tests.support.known_history import DAY1, DAY2, Journal, at, known_history
from tests.support.topics import produce, produce_facts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def row(frame: pd.DataFrame, day: datetime, **keys: str) -> dict[str, Any]:
    match = frame[(pd.to_datetime(frame["day"]) == pd.Timestamp(day.date()))]
    for name, value in keys.items():
        match = match[match[name] == value]
    assert len(match) == 1, (day, keys, match)
    found: dict[str, Any] = match.iloc[0].to_dict()
    return found


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
    # the home rows the report returns (and charts) are the file's, in its order and with its types
    pd.testing.assert_frame_equal(report.homes, homes)
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
    assert names == sorted(["state_time.png", "readings_degC.png", "readings_pct.png", "counts.png",
                            "commands.png", "anomalies.png", "top_homes.png", "overview.png"])  # fmt: skip
    for chart in report.charts:
        data = chart.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, chart

    console = Console(record=True, width=160)
    print_summary(report, console)
    text = console.export_text()
    assert "2026-11-20 to 2026-11-21" in text and "h1" in text and "h2" in text
    assert "40%" in text  # h1: 2 converged of 5 decided commands


async def test_a_lights_figures_come_from_its_type_in_the_report_and_its_charts(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    """The report derives its figures from the device types, as the stream does: a light's on_minutes,
    on_cycles and brightness appear with no edit in the report (h3's figures worked out by hand)."""
    j = Journal()
    j.register("li1", "h3", "light")
    # li1: on 23:00 -> 00:15 (60 min on day 1, 15 on day 2), on again 06:00 -> its last reading 06:30.
    j.report("li1", "h3", at(DAY1, 22), power="off", brightness_pct=0)
    j.report("li1", "h3", at(DAY1, 23), power="on", brightness_pct=80)
    j.report("li1", "h3", at(DAY1, 23, 30), brightness_pct=60)
    j.report("li1", "h3", at(DAY2, 0, 15), power="off")
    j.report("li1", "h3", at(DAY2, 6), power="on", brightness_pct=100)
    j.report("li1", "h3", at(DAY2, 6, 30), brightness_pct=50)
    await produce_facts(stack, j.facts)
    settings = AnalyticsSettings(stack=stack, output_dir=tmp_path / "report", checkpoint_dir=tmp_path / "ck")

    report = build_report(spark, settings)

    devices = pd.read_parquet(report.devices_path)
    check(row(devices, DAY1, device_id="li1"), {
        "device_type": "light", "readings": 3, "on_minutes": 60.0, "on_cycles": 1, "heating_minutes": 0.0,
        "brightness_pct_mean": 140.0 / 3, "brightness_pct_min": 0.0, "brightness_pct_max": 80.0,
        "brightness_pct_count": 3, "locks": 0,
    })  # fmt: skip
    check(row(devices, DAY2, device_id="li1"), {
        "readings": 3, "on_minutes": 45.0, "on_cycles": 1, "brightness_pct_mean": 75.0,
    })  # fmt: skip
    check(row(report.homes, DAY2, home_id="h3"), {
        "devices": 1, "on_minutes": 45.0, "on_cycles": 1, "brightness_pct_mean": 75.0,
        "brightness_pct_max": 100.0,
    })  # fmt: skip
    console = Console(record=True, width=160)
    print_summary(report, console)
    text = console.export_text()
    assert "on h" in text and "1.8" in text  # 105 minutes on, in hours
    assert any(p.name == "state_time.png" for p in report.charts)


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
