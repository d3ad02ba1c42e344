"""What a device may do on the broker: only its own topics; simulated devices only through the simulator
hub; and a person being a device with Debian's mosquitto clients, as the README shows."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.schema.events import StateReported
from hearth_shared.schema.mqtt import state_topic
from tests.integration.test_device_gateway import journal_of
from tests.support.identity_stack import Identity, account, register
from tests.support.mosquitto_clients import Subscriber, publish, wait_connect_code
from tests.support.mqtt_devices import connected
from tests.support.mqtt_devices import register as register_device
from tests.support.platform import Platform
from tests.support.waiting import eventually, poll_until

pytestmark = pytest.mark.integration


async def test_a_device_can_neither_publish_nor_read_another_devices_topics(
    identity: Identity, tmp_path: Path
) -> None:
    mosquitto = identity.broker
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with identity.client(home) as api:
        mine, other = (
            account((await register(api, home))["credentials"]),
            (await register(api, home))["device_id"],
        )
    await wait_connect_code(mosquitto, mine, 0)
    watcher = Subscriber(
        mosquitto, mosquitto.admin, [f"hearth/devices/{other}/#"], tmp_path / "watch.out"
    ).start()
    spy = Subscriber(mosquitto, mine, [f"hearth/devices/{other}/commands"], tmp_path / "spy.out").start()
    try:
        await asyncio.sleep(0.5)
        forged = publish(mosquitto, mine, f"hearth/devices/{other}/state", '{"seq": 1}', mqtt5=True)
        assert "not authori" in (forged.stdout + forged.stderr).lower(), forged
        own = publish(mosquitto, mine, f"hearth/devices/{mine.username}/state", '{"seq": 1}')
        assert own.returncode == 0, own.stderr
        marker = f"marker-{uuid.uuid4().hex}"
        sent = publish(mosquitto, mosquitto.admin, f"hearth/devices/{other}/commands", marker)
        assert sent.returncode == 0, sent.stderr
        await watcher.wait_for_line(marker)  # it was delivered to a reader that may read it...
        await asyncio.sleep(0.5)
        assert not any(marker in line for line in spy.lines())  # ...and never to the other device
        assert not any('"seq": 1' in line for line in watcher.lines())  # the forged report never arrived
    finally:
        watcher.stop()
        spy.stop()


async def test_a_simulated_device_has_no_credential_and_only_the_simulator_hub_acts_for_it(
    identity: Identity, tmp_path: Path
) -> None:
    mosquitto = identity.broker
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with identity.client(home) as api:
        simulated = await register(api, home, simulated=True)
        real = await register(api, home)
        assert "credentials" not in simulated
        refused = await api.post(f"/v1/devices/{simulated['device_id']}/credentials")
        assert refused.status_code == 409, refused.text
    hub = mosquitto.simulator
    watcher = Subscriber(
        mosquitto,
        mosquitto.admin,
        [f"hearth/devices/{simulated['device_id']}/state", f"hearth/devices/{real['device_id']}/state"],
        tmp_path / "watch.out",
    ).start()
    try:
        await asyncio.sleep(0.5)

        def hub_publishes() -> bool:  # once the follower has given the hub the new device
            publish(mosquitto, hub, f"hearth/devices/{simulated['device_id']}/state", "sim-state")
            return any(
                f"hearth/devices/{simulated['device_id']}/state sim-" in line for line in watcher.lines()
            )

        await eventually(hub_publishes, "the hub's report for its new device", timeout_s=15, every_s=0.1)
        forged = publish(
            mosquitto, hub, f"hearth/devices/{real['device_id']}/state", "hub-forged", mqtt5=True
        )
        assert "not authori" in (forged.stdout + forged.stderr).lower(), forged
        await asyncio.sleep(0.5)
        assert not any("hub-forged" in line for line in watcher.lines())
    finally:
        watcher.stop()


async def test_a_person_is_a_device_with_mosquitto_clients_as_the_readme_shows(
    platform: Platform, mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """The README's "Be a device from a terminal": mosquitto_pub for the availability, the state and the
    ack, mosquitto_sub for the commands; the command converges. The broker makes a device's client id its
    username, so a device has one connection at a time (a second one takes the first over): the person
    runs mosquitto_sub while waiting for the command and stops it (Ctrl-C) before publishing again."""
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with platform.client(platform.command_api, home) as api:
        twin = await register(api, home)
        device_id, device = twin["device_id"], account(twin["credentials"])
        await wait_connect_code(mosquitto, device, 0)
        base = f"hearth/devices/{device_id}"
        online = publish(mosquitto, device, f"{base}/availability", "online", retain=True)
        assert online.returncode == 0, online.stderr
        report = '{"seq": 1, "at": "2026-11-23T12:00:00Z", "state": {"lock_state": "locked"}}'
        assert publish(mosquitto, device, f"{base}/state", report).returncode == 0
        sub = Subscriber(
            mosquitto, device, [f"{base}/commands", f"{base}/errors"], tmp_path / "dev.out"
        ).start()
        try:
            await asyncio.sleep(0.5)
            sent = await api.post(f"/v1/devices/{device_id}/commands", json={"name": "unlock", "params": {}})
            assert sent.status_code == 202, sent.text
            command_id = sent.json()["command_id"]
            await sub.wait_for_line(command_id, timeout_s=30)
            sub.stop()  # Ctrl-C: a clean disconnect (no will), before the device's next connection
            ack = f'{{"command_id": "{command_id}", "result": "ok"}}'
            assert publish(mosquitto, device, f"{base}/acks", ack).returncode == 0
            report = '{"seq": 2, "at": "2026-11-23T12:00:01Z", "state": {"lock_state": "unlocked"}}'
            assert publish(mosquitto, device, f"{base}/state", report).returncode == 0
            status = await poll_until(
                lambda: api.get(f"{platform.query_api}/v1/commands/{command_id}"),
                lambda status: status.status_code == 200 and status.json().get("status") == "converged",
                f"command {command_id} converged",
                timeout_s=20,
                every_s=0.2,
            )
            assert status.json()["status"] == "converged"
        finally:
            sub.stop()


async def test_a_report_published_to_another_devices_topic_changes_nothing_in_the_journal(
    platform: Platform, mosquitto: MosquittoBroker
) -> None:
    """Through the whole platform (broker, gateway, actor): device A's report on device B's ``state``
    never becomes a fact of B, while A's own report, sent after it, becomes one of A's."""
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with platform.client(platform.command_api, home) as api:
        mine_id, mine_password = await register_device(api, home)
        other_id, _ = await register_device(api, home)
    device = await connected(mosquitto, mine_id, mine_password)
    try:
        forged = {"seq": 1, "at": "2026-11-23T12:00:00Z", "state": {"ambient_c": 99.0}}
        await device.publish_raw(state_topic(other_id), json.dumps(forged).encode())
        await device.report({"ambient_c": 18.5}, seq=2)
        facts = await journal_of(platform, mine_id, lambda f: any(isinstance(e, StateReported) for e in f))
        assert [e.payload.device_seq for e in facts if isinstance(e, StateReported)] == [2]
        others = await journal_of(platform, other_id, lambda f: bool(f))  # its registration, at least
        assert [type(e).__name__ for e in others if isinstance(e, StateReported)] == []
    finally:
        await device.close()
