"""Availability a device can no longer give itself, on the real broker and the running services: a revoked
device's retained ``online`` does not outlive the revocation, and a hub's dropped connection (its will)
takes its children offline at once (hearth_device_gateway.service.availability_keeper)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.schema.events import DeviceCredentialsRevoked, DeviceWentOffline
from hearth_shared.schema.mqtt import availability_topic, commands_topic, hub_availability_topic, state_topic
from tests.integration.test_device_gateway import THERMOSTAT, journal_of
from tests.support.mosquitto_clients import Subscriber, publish, retained
from tests.support.mqtt_devices import connected, register
from tests.support.platform import Platform
from tests.support.waiting import eventually, poll_until, twin_when

pytestmark = pytest.mark.integration

AT_ONCE_S = 4.0  # under the platform's silence timeout (5 s): offline by the message, not by a tick


async def retained_becomes(mosquitto: MosquittoBroker, topic: str, want: str, timeout_s: float) -> float:
    """Seconds until the retained message on ``topic`` reads ``want``."""
    now: list[str] = []

    async def retains_it() -> bool:
        now[:] = [await asyncio.to_thread(retained, mosquitto, topic)]
        return now[0] == want

    return await eventually(
        retains_it, f"{topic} to retain {want!r}", timeout_s=timeout_s, every_s=0.2, shown=now.copy
    )


def by_a_request(fact: Any) -> bool:
    """An offline fact decided on a request (an availability message), not by the silence timeout's tick."""
    return isinstance(fact, DeviceWentOffline) and fact.causation_id is not None


async def test_a_revoked_devices_retained_online_is_cleared_and_its_twin_is_offline(
    platform: Platform,
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    mosquitto: MosquittoBroker,
    home: str,
) -> None:
    device_id, password = await register(api, home)
    device = await connected(mosquitto, device_id, password)  # says `online`, retained
    try:
        await device.report(THERMOSTAT)
        await twin_when(query, device_id, lambda t: t["connectivity"]["online"])
        assert await asyncio.to_thread(retained, mosquitto, availability_topic(device_id)) == "online"
        response = await api.delete(f"/v1/devices/{device_id}/credentials")
        assert response.status_code == 204, response.text
        took = await retained_becomes(mosquitto, availability_topic(device_id), "offline", 10.0)
        print(f"DELETE credentials -> retained availability 'offline': {took:.2f} s")
        twin = await twin_when(query, device_id, lambda t: not t["connectivity"]["online"])
        assert twin["connectivity"]["online"] is False
        facts = await journal_of(
            platform, device_id, lambda f: any(isinstance(e, DeviceCredentialsRevoked) for e in f)
        )
        assert any(isinstance(e, DeviceWentOffline) for e in facts), facts
    finally:
        await device.close(offline=False)  # it was dropped; stop its reconnecting


async def test_a_dropped_hubs_will_takes_its_children_offline_at_once(
    platform: Platform,
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    mosquitto: MosquittoBroker,
    home: str,
    tmp_path: Path,
) -> None:
    """Debian's mosquitto_sub is the hub (the simulator's account, its will on the hub's availability),
    mosquitto_pub speaks for its two simulated children; kill -9 of the hub makes both offline at once."""
    children = []
    for _ in range(2):
        body = {"home_id": home, "type": "thermostat", "name": "sim", "simulated": True}
        response = await api.post("/v1/devices", json=body)
        assert response.status_code == 201, response.text
        children.append(str(response.json()["device_id"]))
    hub = mosquitto.simulator
    will = ["-i", f"test-hub-{home}", "--will-topic", hub_availability_topic(hub.username)]
    will += ["--will-payload", "offline", "--will-retain", "--will-qos", "1", "-k", "60"]
    listener = Subscriber(
        mosquitto, hub, [commands_topic(c) for c in children], tmp_path / "hub.out", will
    ).start()
    seq = itertools.count(1)

    def say(topic: str, text: str, *, retain: bool = False) -> None:
        done = publish(mosquitto, hub, topic, text, retain=retain)
        assert done.returncode == 0, done.stderr

    def report_all() -> None:
        for child in children:
            message = {"seq": next(seq), "at": "2026-11-23T12:00:00+00:00", "state": THERMOSTAT}
            say(state_topic(child), json.dumps(message))

    try:
        await asyncio.sleep(0.5)
        say(hub_availability_topic(hub.username), "online", retain=True)

        async def children_said_online() -> list[dict[str, Any]]:
            for child in children:
                say(availability_topic(child), "online", retain=True)
            await asyncio.to_thread(report_all)
            return [(await query.get(f"/v1/devices/{c}")).json() for c in children]

        await poll_until(  # until the follower has let the hub act for the new children, and they are online
            children_said_online,
            lambda twins: all(t.get("connectivity", {}).get("online") for t in twins),
            "the hub's new children online",
            timeout_s=30,
            every_s=0.5,
        )
        await asyncio.to_thread(report_all)  # fresh: the silence timeout is 5 s away
        assert listener.proc is not None
        os.kill(listener.proc.pid, signal.SIGKILL)  # the hub's connection drops: the broker sends its will
        listener.proc.wait(10)
        killed = time.monotonic()
        for child in children:
            await twin_when(query, child, lambda t: not t["connectivity"]["online"], timeout_s=AT_ONCE_S)
        took = time.monotonic() - killed
        print(f"hub killed -> both children offline in the twin: {took:.2f} s")
        for child in children:
            facts = await journal_of(platform, child, lambda f: any(by_a_request(e) for e in f))
            offline = [e for e in facts if isinstance(e, DeviceWentOffline)]
            assert by_a_request(offline[0]), offline  # by the keeper's message, not by a tick
            assert await asyncio.to_thread(retained, mosquitto, availability_topic(child)) == "offline"
    finally:
        listener.stop()
