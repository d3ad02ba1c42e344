"""Devices over MQTT through the device gateway, on the real broker and the running services: the SDK and
mosquitto_pub/mosquitto_sub play the devices with the credentials Hearth issued them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from hearth_devstack.servers.mosquitto import MosquittoBroker, MqttAccount
from hearth_shared.schema.events import DeadLetter, DeviceWentOffline, StateReported, decode_event
from hearth_shared.schema.mqtt import (
    MAX_PAYLOAD_BYTES,
    acks_topic,
    availability_topic,
    commands_topic,
    state_topic,
)
from tests.support.commands import final_command, send
from tests.support.mosquitto_clients import Subscriber, publish, wait_connect_code
from tests.support.mqtt_devices import connected, read_topic, register
from tests.support.platform import Platform
from tests.support.waiting import twin_when

pytestmark = pytest.mark.integration

THERMOSTAT = {"ambient_c": 19.0, "hvac_mode": "heat", "hvac_action": "idle", "target_c": 19.0}


async def journal_of(platform: Platform, device_id: str, done: Any, timeout_s: float = 30) -> list[Any]:
    """The device's facts in the journal, once ``done(facts)`` holds."""

    def facts(records: list[Any]) -> list[Any]:
        return [decode_event(r.value) for r in records if r.key == device_id.encode()]

    records = await read_topic(
        platform.settings.kafka_bootstrap_servers,
        platform.settings.topics.journal,
        lambda records: done(facts(records)),
        timeout_s,
    )
    return facts(records)


async def dead_letters_of(platform: Platform, device_id: str, count: int) -> list[DeadLetter]:
    records = await read_topic(
        platform.settings.kafka_bootstrap_servers,
        platform.settings.topics.dead_letters,
        lambda records: sum(r.key == device_id.encode() for r in records) >= count,
    )
    return [msgspec.json.decode(r.value, type=DeadLetter) for r in records if r.key == device_id.encode()]


def by_topic(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for topic, reason in pairs:
        grouped.setdefault(topic, []).append(reason)
    return grouped


async def test_a_device_connects_with_its_credentials_and_a_command_converges_over_mqtt(
    api: httpx.AsyncClient, query: httpx.AsyncClient, mosquitto: MosquittoBroker, home: str
) -> None:
    device_id, password = await register(api, home)
    device = await connected(mosquitto, device_id, password)
    try:
        await device.report(THERMOSTAT)
        await twin_when(
            query, device_id, lambda t: t["connectivity"]["online"] and t["reported"].get("target_c") == 19
        )
        sent = await send(api, device_id, "set_target_temperature", {"target_c": 21.5})
        assert sent.status_code == 202, sent.text
        command = await device.next_command(timeout_s=30)
        assert (str(command.command_id), command.name, command.params) == (
            sent.json()["command_id"],
            "set_target_temperature",
            {"target_c": 21.5},
        )
        await device.ack(command, report={"target_c": 21.5, "hvac_action": "heating"})  # one message
        view = await final_command(query, sent.json()["command_id"])
        assert [step["status"] for step in view["history"]] == [
            "pending",
            "accepted",
            "dispatched",
            "acknowledged",
            "converged",
        ]
    finally:
        await device.close()


async def test_bad_payloads_are_dead_lettered_with_an_errors_message_and_the_device_stays_connected(
    platform: Platform,
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    mosquitto: MosquittoBroker,
    home: str,
) -> None:
    device_id, password = await register(api, home)
    device = await connected(mosquitto, device_id, password)
    try:
        await device.report(THERMOSTAT, seq=10)
        bad = [
            (state_topic(device_id), b"{not json", "invalid_json"),
            (state_topic(device_id), b'{"seq": 11, "state": {"ambient_c": 1}}', "invalid_fields"),
            (state_topic(device_id), b'{"seq": 12, "at": "2026-01-01T00:00:00Z", "state": {"x": "a\\u0000"}}',
             "unstorable_value"),
            (state_topic(device_id), b" " * (MAX_PAYLOAD_BYTES + 1), "payload_too_large"),
            (acks_topic(device_id), b'{"command_id": "nope", "result": "ok"}', "invalid_fields"),
            (availability_topic(device_id), b"maybe", "invalid_availability"),
        ]  # fmt: skip
        for topic, payload, _ in bad:
            await device.publish_raw(topic, payload)
        errors = [await device.next_error(timeout_s=30) for _ in bad]
        # Each topic's in order; state and the others come through the gateway's two connections, so
        # not in one order with each other.
        assert by_topic([(e.topic, e.error) for e in errors]) == by_topic([(t, r) for t, _, r in bad])

        letters = await dead_letters_of(platform, device_id, len(bad))
        assert by_topic([(letter.source_topic, letter.reason) for letter in letters]) == by_topic(
            [(t, r) for t, _, r in bad]
        )
        [first] = [letter for letter in letters if letter.reason == "invalid_json"]
        assert first.value == "{not json" and first.offset == -1

        # Out of order: seq 9 comes after seq 10 and changes nothing; the device is still connected and
        # its next report (seq 13) lands.
        await device.report({"ambient_c": 5.0}, seq=9)
        await device.report({"ambient_c": 20.5}, seq=13)
        # (.get: under load the view may not show even the first report yet, seq 10, when first asked)
        twin = await twin_when(query, device_id, lambda t: t["reported"].get("ambient_c") == 20.5)
        assert twin["connectivity"]["online"] is True

        def seqs(facts: list[Any]) -> list[int]:
            return [e.payload.device_seq for e in facts if isinstance(e, StateReported)]

        facts = await journal_of(platform, device_id, lambda f: 13 in seqs(f))
        # 10 then 13, never 9; or 13 alone: a worker behind on telemetry (the session's platform, after
        # tests that wrote weeks of history) may coalesce 10 into 13 in one batch (coalescing.py).
        assert seqs(facts) in ([10, 13], [13])
    finally:
        await device.close()


async def test_mosquitto_clients_as_a_device_and_the_will_takes_it_offline_at_once(
    platform: Platform,
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    mosquitto: MosquittoBroker,
    home: str,
    tmp_path: Path,
) -> None:
    device_id, password = await register(api, home)
    device = MqttAccount(device_id, password)
    will = ["-i", device_id, "--will-topic", availability_topic(device_id), "--will-payload", "offline"]
    will += ["--will-retain", "--will-qos", "1", "-k", "60"]

    def pub(topic: str, message: dict[str, Any] | str, *, retain: bool = False) -> None:
        text = message if isinstance(message, str) else json.dumps(message)
        done = publish(mosquitto, device, topic, text, retain=retain)
        assert done.returncode == 0, done.stderr

    await wait_connect_code(mosquitto, device, 0, timeout_s=30)  # the broker knows its password now
    # One connection per device at a time (its client id is its username): mosquitto_pub first, then
    # mosquitto_sub while a command is awaited, stopped cleanly before the device publishes again.
    pub(availability_topic(device_id), "online", retain=True)
    pub(state_topic(device_id), {"seq": 1, "at": "2026-11-23T12:00:00+00:00", "state": THERMOSTAT})
    listener = Subscriber(mosquitto, device, [commands_topic(device_id)], tmp_path / "sub-1", will).start()
    try:
        await twin_when(query, device_id, lambda t: t["connectivity"]["online"])

        sent = await send(api, device_id, "set_hvac_mode", {"mode": "cool"})
        assert sent.status_code == 202, sent.text
        command_id = sent.json()["command_id"]
        await listener.wait_for_line(command_id, timeout_s=30)
        line = next(line for line in listener.lines() if command_id in line)
        topic, payload = line.split(" ", 1)
        command = json.loads(payload)
        assert (topic, command["name"], command["params"]) == (
            commands_topic(device_id),
            "set_hvac_mode",
            {"mode": "cool"},
        )
        listener.stop()  # clean (SIGTERM): no will
        pub(acks_topic(device_id), {"command_id": command_id, "result": "ok"})
        pub(
            state_topic(device_id),
            {"seq": 2, "at": "2026-11-23T12:00:01+00:00", "state": {"hvac_mode": "cool"}},
        )
        assert (await final_command(query, command_id))["status"] == "converged"

        # Now the connection drops: the broker publishes the will, and the device is offline at once (a
        # fact caused by the availability request, not by the silence timeout's tick; the platform's
        # silence timeout is 5 s, so a fresh report first).
        pub(
            state_topic(device_id),
            {"seq": 3, "at": "2026-11-23T12:00:02+00:00", "state": {"ambient_c": 19.5}},
        )
        await twin_when(
            query, device_id, lambda t: t["connectivity"]["online"] and t["reported"]["ambient_c"] == 19.5
        )
        listener = Subscriber(
            mosquitto, device, [commands_topic(device_id)], tmp_path / "sub-2", will
        ).start()
        await asyncio.sleep(1.0)  # connected, its will registered
        assert listener.proc is not None and listener.proc.poll() is None, listener.lines()
        os.kill(listener.proc.pid, signal.SIGKILL)
        listener.proc.wait(10)
        twin = await twin_when(query, device_id, lambda t: not t["connectivity"]["online"])
        facts = await journal_of(platform, device_id, lambda f: any(_by_the_will(e) for e in f))
        offline = [e for e in facts if isinstance(e, DeviceWentOffline)]
        assert _by_the_will(offline[-1]), offline  # no tick took it offline before the will did
        assert twin["connectivity"]["last_seen"] is not None
    finally:
        listener.stop()


def _by_the_will(fact: Any) -> bool:
    """An offline fact decided on a request (the availability will), not by the silence timeout's tick."""
    return isinstance(fact, DeviceWentOffline) and fact.causation_id is not None
