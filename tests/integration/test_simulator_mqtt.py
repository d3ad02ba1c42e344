"""The fleet simulator plays simulated devices over MQTT, as a hub with its own credential: a device
registered with "simulated": true after the simulator started comes online and converges a command, all
through the broker and the device gateway (the simulator writes no Kafka)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hearth_devstack.launch.service_processes import Services, services_running
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_devstack.supervision.process import ManagedProcess
from tests.support.commands import final_command, send
from tests.support.platform import Platform
from tests.support.registration import register_device
from tests.support.waiting import twin_when

pytestmark = pytest.mark.integration


@pytest.fixture
def simulator(platform: Platform, mosquitto: MosquittoBroker, tmp_path: Path) -> Iterator[ManagedProcess]:
    services = Services(
        platform.settings,
        logs=tmp_path / "logs",
        data=tmp_path / "data",
        mqtt_port=mosquitto.port,
        mqtt_platform_port=mosquitto.platform_port,
        mqtt_simulator_password=mosquitto.simulator.password,
        extra_env={"HEARTH_SIMULATOR_RATE": "2"},
    )
    with services_running(services, ["simulator"]) as parts:
        yield parts["simulator"]


async def test_a_simulated_device_registered_later_is_played_over_mqtt(
    platform: Platform, simulator: ManagedProcess
) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with (
        platform.client(platform.command_api, home) as api,
        platform.client(platform.query_api, home) as query,
    ):
        body = {  # no device_id: a home token does not choose it
            "home_id": home,
            "type": "thermostat",
            "name": "Sim",
            "simulated": True,
        }
        registered = await api.post("/v1/devices", json=body)
        assert registered.status_code == 201, registered.text
        assert registered.json().get("credentials") is None  # the hub connects for it
        device_id = registered.json()["device_id"]
        await twin_when(
            query, device_id, lambda t: t["connectivity"]["online"] and "ambient_c" in t["reported"], 60
        )
        sent = await send(api, device_id, "set_target_temperature", {"target_c": 23.0})
        assert sent.status_code == 202, sent.text
        view = await final_command(query, sent.json()["command_id"], timeout_s=60)
        assert view["status"] == "converged", view


async def test_a_burst_of_registrations_never_drops_the_hub(
    platform: Platform, simulator: ManagedProcess
) -> None:
    """Each registration reloads the broker; the hub acts for a new device only once the broker lets it
    (the follower's ``allowed``), so it never publishes what the ACL denies, which Mosquitto 2.0.11 answers
    by dropping the connection: the hub keeps the one connection it had, and every device comes online."""
    before = simulator.log_path.stat().st_size  # the hub's MqttLink logs every connection it loses
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with (
        platform.client(platform.command_api, home) as api,
        platform.client(platform.query_api, home) as query,
    ):
        devices: list[str] = []
        for burst in range(4):  # each burst a reload or two, while the hub plays the bursts before
            devices += await asyncio.gather(
                *(register_device(api, home, "lock", f"Lock {i}", simulated=True) for i in range(25))
            )
            await asyncio.sleep(0.3 * burst)
        for device_id in devices:
            await twin_when(query, device_id, lambda t: t["connectivity"]["online"] and t["reported"], 60)
    with simulator.log_path.open("rb") as f:
        f.seek(before)
        since = f.read().decode(errors="replace")
    assert "MQTT connection lost" not in since, since[-2000:]
