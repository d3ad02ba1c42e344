"""Two MQTT broker shards end to end (tests/support/shard_stack.py): a device registered on each connects
with its credentials to its own broker the moment the registration is answered (no retry), the other
broker refuses it, and it is commanded through its own shard's gateway; an operator's move gives it new
credentials naming the other broker, which it uses at once, and the old broker refuses it from its next
reload on. The simulator plays a simulated device through its own shard's hub, and through the other's
once moved."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hearth_device import DeviceConnection
from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.servers.mosquitto import MqttAccount, mqtt_connect_code
from hearth_devstack.servers.postgres import PostgresServer
from hearth_devstack.servers.redis import RedisServer
from hearth_shared.schema.shards import assign_shard
from tests.support.mosquitto_clients import NOT_AUTHORISED
from tests.support.shard_stack import SHARDS, ShardStack, shard_stack
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def shards(
    kafka: KafkaBroker, postgres: PostgresServer, redis_server: RedisServer, servers_dir: Path
) -> Iterator[ShardStack]:
    with shard_stack(kafka, postgres, redis_server, servers_dir / "shards") as running:
        yield running


def device_on(shard: str) -> str:
    """A new device id that the command API puts on ``shard`` (its pick is a stable hash of the id)."""
    while True:
        device_id = f"lock-{uuid.uuid4().hex[:10]}"
        if assign_shard(device_id, list(SHARDS)) == shard:
            return device_id


async def register(api: httpx.AsyncClient, device_id: str) -> dict[str, Any]:
    body = {"device_id": device_id, "home_id": f"home-{device_id}", "type": "lock", "name": "Door"}
    answer = await api.post("/v1/devices", json=body)
    assert answer.status_code == 201, answer.text
    credentials: dict[str, Any] = answer.json()["credentials"]
    return credentials


async def connected(credentials: dict[str, Any]) -> DeviceConnection:
    """The device, connected once with the credentials as answered: a refusal raises (no retry)."""
    device = DeviceConnection.at_url(
        credentials["mqtt_url"], username=credentials["username"], password=credentials["password"]
    )
    await device.connect()
    await asyncio.wait_for(device.link.subscribed(), 10)
    return device


async def commanded(
    api: httpx.AsyncClient, device: DeviceConnection, name: str, state: str
) -> dict[str, Any]:
    """Send ``name`` and let the device carry it out (ack with its report); the answer once converged."""

    async def carry_out() -> None:
        command = await device.next_command(timeout_s=30)
        await device.ack(command, report={"lock_state": state, "door": "closed"})

    doing = asyncio.create_task(carry_out())
    answer = await api.post(
        f"/v1/devices/{device.username}/commands?wait=converged&timeout_s=30",
        json={"name": name, "params": {}},
    )
    await asyncio.wait_for(doing, 30)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def test_a_device_on_each_shard_connects_at_once_to_its_own_broker_only_and_is_commanded(
    shards: ShardStack,
) -> None:
    async with shards.client() as api:
        for shard in SHARDS:
            credentials = await register(api, device_on(shard))
            own, other = shards.brokers[shard], shards.brokers[SHARDS[1 - SHARDS.index(shard)]]
            assert credentials["mqtt_url"] == own.url
            device = await connected(credentials)  # right after the answer, no retry
            try:
                account = MqttAccount(credentials["username"], credentials["password"])
                assert mqtt_connect_code(other.host, other.port, account) == NOT_AUTHORISED
                await device.report({"lock_state": "unlocked", "door": "closed"})
                result = await commanded(api, device, "lock", "locked")
                assert (result["status"], result["timed_out"]) == ("converged", False), (
                    result,
                    shards.logs(),
                )
            finally:
                await device.close()


async def test_a_moved_device_gets_credentials_for_its_new_broker_and_the_old_one_refuses_it(
    shards: ShardStack,
) -> None:
    device_id = device_on(SHARDS[0])
    old, new = shards.brokers[SHARDS[0]], shards.brokers[SHARDS[1]]
    async with shards.client() as api:
        first = await register(api, device_id)
        device = await connected(first)
        await device.report({"lock_state": "locked", "door": "closed"})
        await device.close()

        answer = await api.post(f"/v1/devices/{device_id}/shard", json={"shard": SHARDS[1]})
        assert answer.status_code == 200, answer.text
        moved = answer.json()
        assert (moved["shard"], moved["mqtt_url"]) == (SHARDS[1], new.url)
        credentials = moved["credentials"]
        assert credentials["mqtt_url"] == new.url and credentials["password"] != first["password"]

        device = await connected(credentials)  # on its new broker at once
        try:
            # The old broker drops the device at its follower's next reload (README, "A move"): the move's
            # answer waits for the new broker only, so on a busy machine the old one may still let it in.
            for account in (
                MqttAccount(device_id, first["password"]),
                MqttAccount(device_id, credentials["password"]),
            ):
                await eventually(
                    lambda account=account: mqtt_connect_code(old.host, old.port, account) == NOT_AUTHORISED,
                    f"the old broker refusing {device_id}",
                    timeout_s=30,
                    every_s=0.5,
                )
            result = await commanded(api, device, "unlock", "unlocked")
            assert (result["status"], result["timed_out"]) == ("converged", False), (result, shards.logs())
        finally:
            await device.close()

        nowhere = await api.post(f"/v1/devices/{device_id}/shard", json={"shard": "nowhere"})
        assert nowhere.status_code == 422, nowhere.text
        again = await api.post(f"/v1/devices/{device_id}/shard", json={"shard": SHARDS[1]})
        assert again.status_code == 409, again.text  # there already: nothing written, no new secret


async def test_the_simulator_plays_each_device_through_its_shard_s_hub_and_follows_a_move(
    shards: ShardStack,
) -> None:
    async with shards.client() as api:
        devices = []
        for shard in SHARDS:
            device_id = device_on(shard)
            body = {
                "device_id": device_id,
                "home_id": "sim",
                "type": "thermostat",
                "name": "Hall",
                "simulated": True,
            }
            registered = await api.post("/v1/devices", json=body)
            assert registered.status_code == 201, registered.text
            devices.append(device_id)

        async def converges(device_id: str, mode: str) -> None:
            answer = await api.post(
                f"/v1/devices/{device_id}/commands?wait=converged&timeout_s=60",
                json={"name": "set_hvac_mode", "params": {"mode": mode}},
                timeout=75.0,  # past the server's wait: a command that does not converge shows the logs
            )
            assert answer.status_code == 200, answer.text
            assert (answer.json()["status"], answer.json()["timed_out"]) == ("converged", False), (
                shards.logs()
            )

        for device_id in devices:  # each commanded through its shard's gateway, played by its shard's hub
            await converges(device_id, "cool")
        moved = await api.post(f"/v1/devices/{devices[1]}/shard", json={"shard": SHARDS[0]})
        assert moved.status_code == 200 and "credentials" not in moved.json(), moved.text
        await converges(devices[1], "heat")  # now through shard 0's gateway and hub
