"""The command lifecycle on the real broker, through the real services: the test plays the device."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer

from tests.support.commands import final_command, send
from tests.support.device_link import DeviceLink
from tests.support.platform import Platform
from tests.support.registration import register_device
from tests.support.waiting import twin_when

pytestmark = pytest.mark.integration


@pytest.fixture
async def device(platform: Platform) -> AsyncIterator[DeviceLink]:
    async with DeviceLink(platform.settings) as link:
        yield link


async def register(api: httpx.AsyncClient, home: str, device_type: str) -> str:
    return await register_device(api, home, device_type, name=device_type)


async def online(device: DeviceLink, device_id: str, state: dict[str, Any]) -> None:
    await device.report(device_id, state)


async def test_a_command_goes_from_pending_to_converged(
    api: httpx.AsyncClient, query: httpx.AsyncClient, device: DeviceLink, home: str
) -> None:
    device_id = await register(api, home, "thermostat")
    await online(
        device, device_id, {"ambient_c": 19.0, "hvac_mode": "heat", "hvac_action": "idle", "target_c": 19}
    )
    sent = await send(api, device_id, "set_target_temperature", {"target_c": 21.5}, key="k1")
    assert sent.status_code == 202
    assert sent.json()["status"] == "pending"
    command_id = sent.json()["command_id"]

    dispatched = await device.next_command(device_id)
    assert (str(dispatched.command_id), dispatched.name, dispatched.params) == (
        command_id,
        "set_target_temperature",
        {"target_c": 21.5},
    )
    await device.ack(device_id, dispatched.command_id)
    await device.report(device_id, {"target_c": 21.5, "hvac_action": "heating"})

    # The retry with the same key and body waits on the same command, and sees it converge.
    retried = await send(
        api, device_id, "set_target_temperature", {"target_c": 21.5}, key="k1", wait="converged"
    )
    assert retried.status_code == 200
    assert (retried.json()["command_id"], retried.json()["status"]) == (command_id, "converged")

    view = await final_command(query, command_id)
    assert [step["status"] for step in view["history"]] == [
        "pending",
        "accepted",
        "dispatched",
        "acknowledged",
        "converged",
    ]
    twin = (await query.get(f"/v1/devices/{device_id}")).json()
    assert twin["desired"]["target_c"] == 21.5
    assert twin["reported"]["target_c"] == 21.5
    assert "target_c" not in twin["delta"]


async def test_an_idempotency_key_with_another_body_is_refused(
    api: httpx.AsyncClient, device: DeviceLink, home: str
) -> None:
    device_id = await register(api, home, "thermostat")
    first = await send(api, device_id, "set_target_temperature", {"target_c": 20}, key="same")
    again = await send(api, device_id, "set_target_temperature", {"target_c": 20}, key="same")
    other = await send(api, device_id, "set_target_temperature", {"target_c": 22}, key="same")
    assert first.json()["command_id"] == again.json()["command_id"]
    assert other.status_code == 422
    assert "different body" in other.text


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"target_c": 40}, "out_of_range"),
        ({"target_c": 20.3}, "invalid_step"),
        ({"temp": 20}, "invalid_params"),
    ],
)
async def test_bad_commands_are_422_and_write_nothing(
    api: httpx.AsyncClient, query: httpx.AsyncClient, home: str, params: dict[str, Any], reason: str
) -> None:
    device_id = await register(api, home, "thermostat")
    response = await send(api, device_id, "set_target_temperature", params)
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == reason
    await asyncio.sleep(1.0)  # give a wrongly written command time to show up in the history
    events = (await query.get(f"/v1/devices/{device_id}/events")).json()["items"]
    # (its credential, and its broker's word that the credential is loaded: the registration's facts)
    assert [e["type"] for e in events] == [
        "device.registered",
        "device.credentials_issued",
        "device.credentials_loaded",
    ]


async def test_locking_with_the_door_open_is_rejected(
    api: httpx.AsyncClient, query: httpx.AsyncClient, device: DeviceLink, home: str
) -> None:
    device_id = await register(api, home, "lock")
    await online(device, device_id, {"lock_state": "unlocked", "door": "open", "battery_pct": 80})
    await asyncio.sleep(0.5)  # the report reaches the actor before the command (both on the inbox, in order)
    sent = await send(api, device_id, "lock", wait="converged")
    assert sent.json()["status"] == "rejected"
    view = await final_command(query, sent.json()["command_id"])
    assert (view["status"], view["reason"]) == ("rejected", "door_open")


async def test_a_device_that_says_no_fails_the_command(
    api: httpx.AsyncClient, query: httpx.AsyncClient, device: DeviceLink, home: str
) -> None:
    device_id = await register(api, home, "lock")
    await online(device, device_id, {"lock_state": "locked", "door": "closed", "battery_pct": 80})
    sent = await send(api, device_id, "unlock")
    command = await device.next_command(device_id)
    await device.ack(device_id, command.command_id, ok=False, reason="device_jammed")
    view = await final_command(query, sent.json()["command_id"])
    assert (view["status"], view["reason"]) == ("failed", "device_jammed")


async def test_a_silent_device_lets_the_command_expire(
    api: httpx.AsyncClient, query: httpx.AsyncClient, device: DeviceLink, home: str
) -> None:
    device_id = await register(api, home, "thermostat")
    await online(device, device_id, {"ambient_c": 20.0, "hvac_mode": "heat"})
    sent = await send(api, device_id, "set_target_temperature", {"target_c": 22}, expires_in_s=1.5)
    await device.next_command(device_id)  # dispatched, and then the device never answers
    view = await final_command(query, sent.json()["command_id"])
    assert view["status"] == "expired"
    assert [s["status"] for s in view["history"]][-1] == "expired"


async def test_commands_to_an_offline_device_are_held_and_the_newer_supersedes(
    api: httpx.AsyncClient, query: httpx.AsyncClient, device: DeviceLink, home: str
) -> None:
    device_id = await register(api, home, "thermostat")  # registered, never heard from: offline
    older = (await send(api, device_id, "set_target_temperature", {"target_c": 20}, wait="accepted")).json()
    newer = (await send(api, device_id, "set_target_temperature", {"target_c": 23}, wait="accepted")).json()
    assert (older["status"], newer["status"]) == ("accepted", "accepted")  # both held, not dispatched
    await online(device, device_id, {"ambient_c": 18.0, "hvac_mode": "heat"})
    dispatched = await device.next_command(device_id)
    assert str(dispatched.command_id) == newer["command_id"]
    assert (await final_command(query, older["command_id"]))["status"] == "superseded"


async def test_an_older_or_repeated_report_never_overwrites_a_newer_one(
    api: httpx.AsyncClient, query: httpx.AsyncClient, device: DeviceLink, home: str
) -> None:
    device_id = await register(api, home, "thermostat")
    await device.report(device_id, {"ambient_c": 21.0}, seq=10)
    await device.report(device_id, {"ambient_c": 18.0}, seq=9)  # late
    await device.report(device_id, {"ambient_c": 21.0}, seq=10)  # duplicate
    await device.report(device_id, {"humidity_pct": 40.0}, seq=11)
    twin = await twin_when(query, device_id, lambda t: "humidity_pct" in t["reported"])
    assert twin["reported"]["ambient_c"] == 21.0
    # The history as far as that twin (the cache is written just before the history's transaction
    # commits, so a twin read may be a moment ahead of the history without min_version).
    history = await query.get(f"/v1/devices/{device_id}/events", params={"min_version": twin["version"]})
    types = [e["type"] for e in history.json()["items"]]
    assert types.count("device.state_reported") == 2


async def test_an_unreadable_inbox_record_goes_to_the_dead_letters(
    platform: Platform, device: DeviceLink
) -> None:
    key = f"junk-{uuid.uuid4().hex[:8]}"
    await device.writer.producer.send_and_wait(
        platform.settings.topics.inbox, b'{"kind": "nope"}', key=key.encode()
    )
    consumer = AIOKafkaConsumer(
        platform.settings.topics.dead_letters,
        bootstrap_servers=platform.settings.kafka_bootstrap_servers,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:

        async def find() -> dict[str, Any]:
            import json

            async for record in consumer:
                letter = json.loads(record.value)
                if letter["key"] == key:
                    return dict(letter)
            raise AssertionError("unreachable")

        letter = await asyncio.wait_for(find(), 30)
    finally:
        await consumer.stop()
    assert (letter["reason"], letter["consumer"], letter["source_topic"]) == (
        "unknown_type",
        "device-actor",
        platform.settings.topics.inbox,
    )
