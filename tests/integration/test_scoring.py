"""A model version published on the models topic reaches the device agents and changes the scoring:
the anomaly fact names the version that scored it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from hearth_shared.adapters.kafka import make_producer
from hearth_shared.schema.events import AnomalyModel, Baseline, encode, utcnow
from tests.support.device_link import DeviceLink
from tests.support.platform import Platform
from tests.support.registration import register_device
from tests.support.waiting import poll_until

pytestmark = pytest.mark.integration


async def test_a_published_model_changes_the_scoring(platform: Platform) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with (
        platform.client(platform.command_api, home) as api,
        platform.client(platform.query_api, home) as query,
        DeviceLink(platform.settings) as device,
    ):
        device_id = await register_device(api, home, "thermostat", name="x")
        await device.report(device_id, {"ambient_c": 24.0})  # |24 - 21| / 3 = 1: normal for the default model
        await poll_until(  # scored (with the default model) before the new model is published
            lambda: query.get(f"/v1/devices/{device_id}"),
            lambda r: r.json().get("reported", {}).get("ambient_c") == 24.0,
            "the first report in the view",
            timeout_s=30,
        )

        version = 1000 + int(uuid.uuid4().int % 1000)  # above any version another test published
        model = AnomalyModel(
            version=version,
            trained_at=utcnow(),
            trained_on=500,
            threshold=3.0,
            min_count=10,
            by_device={device_id: {"ambient_c": {"*": Baseline(500, 21.0, 0.5)}}},
        )
        producer = make_producer(platform.settings.kafka_bootstrap_servers, "test-model")
        await producer.start()
        try:
            await producer.send_and_wait(
                platform.settings.topics.models, encode(model), key=b"telemetry-anomaly"
            )
        finally:
            await producer.stop()

        # Report 24.5 until the agents score with the new model: |24.5 - 21| / 0.5 = 7 > 3 (the default
        # model, which scored the first report, finds 24.5 normal too).
        async def anomalies_after_a_report() -> list[dict[str, Any]]:
            await device.report(device_id, {"ambient_c": 24.5})
            events = (await query.get(f"/v1/devices/{device_id}/events")).json().get("items", [])
            return [e for e in events if e["type"] == "anomaly.detected"]

        anomalies = await poll_until(
            anomalies_after_a_report, bool, "an anomaly scored with the new model", timeout_s=30, every_s=0.5
        )
    assert {a["payload"]["model_version"] for a in anomalies} == {version}
    payload = anomalies[0]["payload"]
    assert (payload["metric"], payload["value"], payload["model_version"]) == ("ambient_c", 24.5, version)
    assert payload["score"] == pytest.approx(7.0)
