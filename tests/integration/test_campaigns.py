"""Firmware campaigns through the real stack: the command API, the campaign driver, the device actor, the
gateway and Mosquitto, with simulated devices that install firmware (and fail as told) over MQTT."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hearth_devstack.launch.service_processes import Services, services_running
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_devstack.supervision.process import ManagedProcess
from hearth_shared.schema.campaign_events import JobMoved
from hearth_shared.schema.events import CommandRequested
from tests.support.platform import Platform
from tests.support.topics import read_campaign_facts, read_journal
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SHA = "5e" * 32
LIMITS = {"max_failed_pct": 20, "max_offline_pct": 20, "max_anomaly_ratio": 5}
FAULTS = "6.6.6=bad_checksum,8.0.0=drifts"


@pytest.fixture(scope="module")
def firmware_simulator(
    platform: Platform, mosquitto: MosquittoBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    """The fleet simulator, with firmware failure modes by version (see hearth_simulator.firmware)."""
    base = tmp_path_factory.mktemp("campaign-simulator")
    services = Services(
        platform.settings,
        logs=base / "logs",
        data=base / "data",
        mqtt_port=mosquitto.port,
        mqtt_platform_port=mosquitto.platform_port,
        mqtt_simulator_password=mosquitto.simulator.password,
        extra_env={
            "HEARTH_SIMULATOR_RATE": "1",
            "HEARTH_SIMULATOR_FIRMWARE_FAULTS": FAULTS,
            "HEARTH_SIMULATOR_FIRMWARE_INSTALL_S": "1",
            # 1 degC/s: a drifting thermostat leaves the default model's band (21 +- 12 degC) in seconds
            "HEARTH_SIMULATOR_FIRMWARE_DRIFT_C_PER_H": "3600",
        },
    )
    with services_running(services, ["simulator"]) as parts:
        yield parts["simulator"]


async def simulated_fleet(platform: Platform, home: str, device_type: str, n: int) -> list[str]:
    """Register ``n`` simulated devices in ``home``; their ids once each reported firmware 1.0.0."""
    async with (
        platform.client(platform.command_api, home) as api,
        platform.client(platform.query_api, home) as query,
    ):
        body = {"home_id": home, "type": device_type, "name": "sim", "simulated": True}
        answers = await asyncio.gather(*(api.post("/v1/devices", json=body) for _ in range(n)))
        assert all(a.status_code == 201 for a in answers), [a.text for a in answers if a.status_code != 201]
        ids = sorted(a.json()["device_id"] for a in answers)

        async def reporting() -> bool:
            listed = (await query.get("/v1/devices", params={"limit": 1000})).json()["items"]
            return sum(1 for t in listed if t["reported"].get("firmware_version") == "1.0.0") == n

        await eventually(
            reporting, f"{n} simulated devices reporting firmware 1.0.0", timeout_s=120, every_s=0.5
        )
        return ids


async def start(admin: httpx.AsyncClient, home: str, device_type: str, version: str, **extra: Any) -> str:
    for fw in ("1.0.0", version):  # the firmware the devices run now is what a rollback returns them to
        registered = await admin.post(
            "/v1/firmware",
            json={
                "device_type": device_type,
                "version": fw,
                "url": f"https://fw.example/{fw}.bin",
                "sha256": SHA,
            },
        )
        assert registered.status_code == 202, registered.text
    body = {
        "device_type": device_type,
        "version": version,
        "url": f"https://fw.example/{version}.bin",
        "sha256": SHA,
        "target": {"home_ids": [home]},
        "waves": [1, 10, 100],
        "soak_s": 2,
        "abort": LIMITS,
        "job_timeout_s": 30,
        **extra,
    }
    answer = await admin.post("/v1/campaigns", json=body)
    assert answer.status_code == 201, answer.text
    campaign_id: str = answer.json()["campaign_id"]
    return campaign_id


async def ended(admin: httpx.AsyncClient, campaign_id: str, timeout_s: float = 240) -> dict[str, Any]:
    """The campaign once it completed or aborted and every rollback ended."""
    seen: dict[str, Any] = {}

    async def done() -> bool:
        nonlocal seen
        seen = (await admin.get(f"/v1/campaigns/{campaign_id}")).json()
        rolling = any(
            d["rollback_to"] and d["state"] != "rolled_back" and not d["reason"]
            for d in seen["devices"].values()
        )
        return seen["status"] in ("completed", "aborted") and not rolling

    await eventually(done, f"campaign {campaign_id} to end", timeout_s=timeout_s, every_s=0.5)
    return seen


async def test_a_campaign_over_100_devices_completes_wave_by_wave(
    platform: Platform, firmware_simulator: ManagedProcess, admin_api: httpx.AsyncClient
) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    ids = await simulated_fleet(platform, home, "lock", 100)
    campaign_id = await start(admin_api, home, "lock", "2.0.0")
    campaign = await ended(admin_api, campaign_id)
    assert campaign["status"] == "completed", {k: v for k, v in campaign.items() if k != "devices"}
    assert [(w["size"], w["state"]) for w in campaign["waves"]] == [
        (1, "passed"),
        (9, "passed"),
        (90, "passed"),
    ]
    assert campaign["jobs"] == {"succeeded": 100}
    assert set(campaign["devices"]) == set(ids)
    # The driver saw the devices' reports in the journal; the views hold them a moment later.
    async with platform.client(platform.query_api, home) as query:

        async def all_on_2() -> bool:
            listed = (await query.get("/v1/devices", params={"limit": 1000})).json()["items"]
            return {t["reported"]["firmware_version"] for t in listed} == {"2.0.0"}

        await eventually(all_on_2, "every twin in the view on firmware 2.0.0", timeout_s=30)


async def test_a_bad_checksum_in_the_first_wave_aborts_before_the_second(
    platform: Platform, firmware_simulator: ManagedProcess, admin_api: httpx.AsyncClient
) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    await simulated_fleet(platform, home, "lock", 20)
    campaign = await ended(admin_api, await start(admin_api, home, "lock", "6.6.6"))
    assert campaign["status"] == "aborted" and campaign["abort"]["reason"] == "failed_pct", campaign["abort"]
    first, second, _ = campaign["waves"]
    assert first["state"] == "aborted" and first["jobs"] == {"failed": 1}
    assert second["state"] == "queued" and second["jobs"] == {"queued": 1}
    (failed,) = [d for d in campaign["devices"].values() if d["state"] == "failed"]
    assert failed["reason"] == "checksum_mismatch"


async def test_a_drifting_first_wave_aborts_and_is_rolled_back_before_the_second(
    platform: Platform, firmware_simulator: ManagedProcess, admin_api: httpx.AsyncClient
) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    await simulated_fleet(platform, home, "thermostat", 20)
    campaign_id = await start(admin_api, home, "thermostat", "8.0.0", waves=[10, 100], soak_s=90)
    campaign = await ended(admin_api, campaign_id, timeout_s=180)
    assert campaign["status"] == "aborted" and campaign["abort"]["reason"] == "anomaly_ratio", campaign[
        "abort"
    ]
    first, second = campaign["waves"]
    assert first["state"] == "aborted" and first["jobs"] == {"rolled_back": 2}, first
    assert second["jobs"] == {"queued": 18}
    back = [d for d, job in campaign["devices"].items() if job["state"] == "rolled_back"]
    async with platform.client(platform.query_api, home) as query:

        async def back_on_1() -> bool:
            twins = [(await query.get(f"/v1/devices/{device_id}")).json() for device_id in back]
            return all(t["reported"]["firmware_version"] == "1.0.0" for t in twins)

        await eventually(back_on_1, "the rolled-back twins in the view on firmware 1.0.0", timeout_s=30)


async def test_a_driver_killed_halfway_through_a_wave_leaves_the_campaign_consistent(
    platform: Platform, firmware_simulator: ManagedProcess, admin_api: httpx.AsyncClient, tmp_path: Path
) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    ids = await simulated_fleet(platform, home, "lock", 30)
    campaign_id = await start(admin_api, home, "lock", "2.0.0", waves=[50, 100], soak_s=3)

    async def halfway() -> bool:
        first = (await admin_api.get(f"/v1/campaigns/{campaign_id}")).json()["waves"][0]
        return bool(first["state"] == "running" and first["jobs"].get("succeeded", 0) < first["size"])

    await eventually(halfway, "the first wave under way", timeout_s=60, every_s=0.5)
    victim = platform.parts["campaigns"]
    assert victim.pid is not None
    os.killpg(victim.pid, signal.SIGKILL)  # no goodbye
    victim.kill_leftovers()
    services = Services(platform.settings, logs=tmp_path / "logs", data=tmp_path / "data")
    driver, timeout_s = services.part("campaigns")
    platform.parts["campaigns"] = driver  # the session's driver from now on (stopped with the others)
    driver.start()
    driver.wait_healthy(timeout_s)

    campaign = await ended(admin_api, campaign_id)
    assert campaign["status"] == "completed" and campaign["jobs"] == {"succeeded": 30}, campaign["jobs"]
    facts = [f for f in await read_campaign_facts(platform.settings) if f.campaign_id == campaign_id]
    assert [f.version for f in facts] == list(range(1, len(facts) + 1))  # each step once, in order
    sent = Counter(f.device_id for f in facts if isinstance(f, JobMoved) and f.state == "sent")
    assert sent == Counter({device_id: 1 for device_id in ids})
    journal = await read_journal(platform.settings)
    updates = Counter(
        e.device_id
        for e in journal
        if isinstance(e, CommandRequested) and e.device_id in sent and e.payload.name == "update_firmware"
    )
    assert updates == sent  # one command per device, though the driver may have submitted one twice
