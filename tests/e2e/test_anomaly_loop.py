"""Closing the loop: a simulated thermostat whose sensor drifts is flagged by the model the streaming job
trained on the journal.

A home of thermostats is registered through the command API; the fleet simulator plays them in-process
(only this home's devices) while the streaming job's training query (``Trigger.AvailableNow``) learns
their baselines from the platform's journal and publishes a model version. The fleet is then started
again with one device drifting fast; the device actors score its readings with that version: an
``anomaly.detected`` fact naming the version in the device's history and an alert in the query API,
while the normal devices, scored by the same version, raise none.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import msgspec
import pytest

from hearth_analytics.jobs.stream import start_training
from hearth_analytics.jobs.train import MODEL_NAME, ModelTrainer
from hearth_analytics.settings import AnalyticsSettings
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.domain.anomaly import DEFAULT_MODEL
from hearth_shared.schema.events import encode, utcnow
from hearth_simulator.registration import fleet_devices
from tests.support.home_fleet import playing, simulator_endpoint
from tests.support.platform import Platform
from tests.support.waiting import poll_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

THERMOSTATS = 3
RATE = 8.0  # reports per second per device
MIN_COUNT = 8  # readings a baseline slice needs (the job's default, 30, would take a while here)
BASELINE_READINGS = 12  # journaled ambient_c readings per device before training starts
DRIFT_C_PER_H = 3600.0  # 1 °C per second: past threshold x std (4 x 0.25 °C) within a few seconds


async def until(
    check: Callable[[], Awaitable[Any]], what: str, timeout_s: float, fleet: asyncio.Task[None]
) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout_s`` or if the fleet died."""

    async def fleet_playing_and_found() -> Any:
        if fleet.done():
            fleet.result()  # raises what stopped it
            pytest.fail(f"the fleet stopped while waiting for {what}")
        return await check()

    return await poll_until(fleet_playing_and_found, bool, what, timeout_s=timeout_s, every_s=0.25)


async def versions(query: httpx.AsyncClient, devices: list[str]) -> dict[str, int]:
    out = {}
    for device_id in devices:
        response = await query.get(f"/v1/devices/{device_id}")
        out[device_id] = response.json()["version"] if response.status_code == 200 else 0
    return out


async def ambient_readings(query: httpx.AsyncClient, device_id: str) -> int:
    """How many of the device's journaled readings carry ``ambient_c``: what the trainer learns from. The
    journal keeps what changed, so a reading equal to the previous one (to 0.1 °C) carries none."""
    response = await query.get(
        f"/v1/devices/{device_id}/events", params={"type": "device.state_reported", "limit": 1000}
    )
    items = response.json().get("items", []) if response.status_code == 200 else []
    return sum("ambient_c" in e["payload"]["reported"] for e in items)


def train(spark: SparkSession, settings: AnalyticsSettings, timeout_s: float) -> ModelTrainer:
    """The streaming job's training query over what the journal holds now (blocking: run it in a thread)."""
    trainer = ModelTrainer(settings)
    query = start_training(spark, settings, once=True, trainer=trainer)
    try:
        finished = query.awaitTermination(int(timeout_s))
    finally:
        if query.isActive:
            query.stop()
    assert finished, f"the training query did not finish in {timeout_s} s"
    assert query.exception() is None, query.exception()
    return trainer


async def publish_default_model(platform: Platform, version: int) -> None:
    """Put the platform's scoring back to the default baselines (as a newer version) for later tests."""
    model = msgspec.structs.replace(DEFAULT_MODEL, version=version, trained_at=utcnow())
    producer = make_producer(platform.settings.kafka_bootstrap_servers, "test-anomaly-loop")
    await producer.start()
    try:
        await producer.send_and_wait(platform.settings.topics.models, encode(model), key=MODEL_NAME.encode())
    finally:
        await producer.stop()


async def test_a_drifting_thermostat_is_flagged_by_the_trained_model(
    platform: Platform, spark: SparkSession, tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    bodies = fleet_devices(home, {"thermostat": THERMOSTATS})
    devices = [b["device_id"] for b in bodies]
    drifting, normal = devices[0], devices[1:]
    mqtt = simulator_endpoint(mosquitto)
    settings = AnalyticsSettings(
        stack=platform.settings,
        checkpoint_dir=tmp_path / "checkpoints",
        output_dir=tmp_path / "reports",
        model_min_count=MIN_COUNT,
    )
    version = 0
    async with (
        platform.client(platform.command_api) as api,  # an admin token: the fleet's ids are chosen
        platform.client(platform.query_api, home) as query,
    ):
        for body in bodies:
            registered = await api.post("/v1/devices", json=body)
            assert registered.status_code == 201, registered.text

        try:
            # 1. Every device reports normally until the journal holds a baseline's worth of readings; the
            # training query learns from what the journal holds when it starts (the fleet plays on).
            async with playing(platform, set(devices), mqtt, rate=RATE) as fleet:

                async def baseline_reported() -> bool:
                    counts = [await ambient_readings(query, d) for d in devices]
                    return all(n >= BASELINE_READINGS for n in counts)

                await until(baseline_reported, "the baseline readings", 60, fleet)
                trainer = await asyncio.to_thread(train, spark, settings, 150)
            assert trainer.published, "the training query published no model"
            model = trainer.published[-1]
            version = model.version
            for device_id in devices:
                baseline = model.by_device[device_id]["ambient_c"]["*"]
                assert baseline.n >= BASELINE_READINGS, (device_id, baseline)

            # 2. The same devices, one of them drifting now, until the actors score it with that version.
            async with playing(
                platform,
                set(devices),
                mqtt,
                rate=RATE,
                drifting_ids=frozenset({drifting}),
                drift_c_per_h=DRIFT_C_PER_H,
            ) as fleet:

                async def flagged() -> list[dict[str, Any]]:
                    response = await query.get(
                        f"/v1/devices/{drifting}/events", params={"type": "anomaly.detected", "limit": 1000}
                    )
                    return [
                        e
                        for e in response.json().get("items", [])
                        if e["payload"]["model_version"] == version and e["payload"]["metric"] == "ambient_c"
                    ]

                anomalies = await until(flagged, f"an anomaly of {drifting} scored by v{version}", 60, fleet)

                async def alerted() -> list[dict[str, Any]]:
                    response = await query.get("/v1/alerts", params={"device_id": drifting, "limit": 1000})
                    return [a for a in response.json()["items"] if a["model_version"] == version]

                alerts = await until(alerted, f"an alert for {drifting}", 30, fleet)

                # The normal devices report on (a few readings each) with the same version in force.
                seen = await versions(query, normal)

                async def normal_scored() -> bool:
                    now = await versions(query, normal)
                    return all(now[d] >= seen[d] + 2 * RATE for d in normal)

                await until(normal_scored, "more readings of the normal devices", 30, fleet)
        finally:
            if version:
                await publish_default_model(platform, version + 1)

        anomaly = anomalies[0]["payload"]
        baseline = model.by_device[drifting]["ambient_c"]["*"]
        assert anomaly["score"] > anomaly["threshold"] == model.threshold, anomaly
        assert abs(anomaly["value"] - baseline.mean) > model.threshold * max(baseline.std, 0.25), anomaly
        alert = alerts[0]
        assert (alert["device_id"], alert["home_id"], alert["metric"]) == (drifting, home, "ambient_c")
        for device_id in normal:
            response = await query.get("/v1/alerts", params={"device_id": device_id, "limit": 1000})
            assert response.status_code == 200
            wrong = [a for a in response.json()["items"] if a["model_version"] == version]
            assert not wrong, (device_id, wrong, model.by_device[device_id])
