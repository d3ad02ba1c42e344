"""Mosquitto as a part of the local stack (hearth_devstack.servers.mosquitto): who may connect on which
listener, TLS with the certificate the stack makes, what survives a restart (accounts, certificate,
retained messages), that a device's subscriptions are renewed after a kill that lost its session, and that
no device can take another's session over with its client id."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from hearth_device import DeviceConnection
from hearth_devstack.launch.server_startup import start_healthy
from hearth_devstack.servers.mosquitto import MqttAccount, mqtt_connect_code
from hearth_shared.schema.mqtt import commands_topic
from tests.support.mosquitto_clients import (
    NOT_AUTHORISED,
    Subscriber,
    admit_devices,
    broker_on_free_ports,
    publish,
    retained,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def test_each_listener_takes_only_its_accounts_and_tls_verifies_the_stacks_certificate(
    tmp_path: Path,
) -> None:
    broker = broker_on_free_ports(tmp_path / "mqtt", tmp_path)
    part = start_healthy(broker.process(), 30)
    try:
        (device,) = admit_devices(broker, "lock-1")
        # The platform listener: the service accounts, and no device.
        assert mqtt_connect_code(broker.host, broker.platform_port, broker.admin) == 0
        assert mqtt_connect_code(broker.host, broker.platform_port, broker.simulator) == 0
        assert mqtt_connect_code(broker.host, broker.platform_port, device) == NOT_AUTHORISED
        # The device listener: devices, and no service account (its clients choose their client ids).
        assert mqtt_connect_code(broker.host, broker.port, device) == 0
        assert mqtt_connect_code(broker.host, broker.port, broker.admin) == NOT_AUTHORISED
        assert mqtt_connect_code(broker.host, broker.port, broker.simulator) == NOT_AUTHORISED
        stranger = MqttAccount("someone", "guess")
        for port in (broker.port, broker.platform_port):
            assert mqtt_connect_code(broker.host, port, stranger) == NOT_AUTHORISED
            anonymous = subprocess.run(
                ["mosquitto_pub", "-h", broker.host, "-p", str(port), "-t", "hearth/x", "-m", "x"],
                capture_output=True, timeout=30, check=False,
            )  # fmt: skip
            assert anonymous.returncode == NOT_AUTHORISED
        topic = "hearth/devices/lock-1/availability"
        for host in ("localhost", "127.0.0.1"):  # the certificate names both
            argv = ["mosquitto_pub", "-h", host, "-p", str(broker.tls_port), "--cafile", str(broker.cafile)]
            argv += ["-u", device.username, "-P", device.password, "-t", topic, "-m", "online"]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
            assert done.returncode == 0, done.stderr
        # Without trusting the stack's certificate, TLS fails (the listener really is TLS).
        argv = ["mosquitto_pub", "-h", "localhost", "-p", str(broker.tls_port), "--capath", str(tmp_path)]
        argv += ["-u", device.username, "-P", device.password, "-t", topic, "-m", "online"]
        assert subprocess.run(argv, capture_output=True, timeout=30, check=False).returncode != 0
    finally:
        part.stop()


def test_a_restart_keeps_accounts_certificate_and_retained_messages(tmp_path: Path) -> None:
    broker = broker_on_free_ports(tmp_path / "mqtt", tmp_path)
    part = start_healthy(broker.process(), 30)
    admin, certificate = broker.admin, broker.cafile.read_bytes()
    try:
        sent = publish(broker, admin, "hearth/devices/d1/availability", "online", retain=True)
        assert sent.returncode == 0, sent.stderr
    finally:
        part.stop()
    again = broker_on_free_ports(broker.data_dir, tmp_path / "again")
    part = start_healthy(again.process(), 30)
    try:
        assert again.admin == admin and again.cafile.read_bytes() == certificate
        assert mqtt_connect_code(again.host, again.platform_port, admin) == 0
        assert retained(again, "hearth/devices/d1/availability") == "online"
    finally:
        part.stop()


async def test_after_a_kill_that_lost_the_session_subscribed_waits_for_the_renewed_subscriptions(
    tmp_path: Path,
) -> None:
    """Mosquitto killed with -9 before it saved its sessions comes back without the device's
    subscriptions. The device's link subscribes again on reconnecting, ``subscribed()`` returns once the
    broker has granted those renewals (until then a command published to it finds no subscriber and is
    dropped), and a command published then reaches the device. (That ``subscribed()`` waits for the
    renewals at all, on localhost's fast SUBACK, is tested in tests/unit/test_mqtt_link_publish.py.)"""
    broker = broker_on_free_ports(tmp_path / "mqtt", tmp_path)
    part = start_healthy(broker.process(), 30)
    [account] = admit_devices(broker, "therm-r")
    device = DeviceConnection(
        username=account.username,
        password=account.password,
        port=broker.port,
        backoff_s=0.1,
        backoff_max_s=0.5,
    )
    granted: list[object] = []
    renewals: list[asyncio.Task[int]] = []
    try:
        await device.connect()
        await device.link.subscribed()
        on_subscribe, announce = device.link.client.on_subscribe, device.link.on_connected
        assert announce is not None

        def counting(client: object, *args: object) -> None:
            granted.append(args)
            on_subscribe(*args)  # gmqtt's getter gives the callback bound to its client already

        async def renewed() -> int:  # the grants the broker had sent when subscribed() returned
            await device.link.subscribed()
            return len(granted)

        def reconnected() -> None:
            announce()
            renewals.append(asyncio.create_task(renewed()))

        device.link.client.on_subscribe = counting
        device.link.on_connected = reconnected
        assert part.pid is not None
        os.kill(part.pid, signal.SIGKILL)
        part.proc.wait(10)  # type: ignore[union-attr]
        part = start_healthy(broker.process(), 30)
        await eventually(lambda: renewals, "the device to reconnect", timeout_s=30)
        # its commands and errors subscriptions, granted again before subscribed() returned
        assert await renewals[0] >= 2, granted
        command = {
            "command_id": str(uuid.uuid4()),
            "name": "set_target_temperature",
            "params": {"target_c": 21},
        }
        command["expires_at"] = "2030-01-01T00:00:00Z"
        sent = publish(broker, broker.admin, commands_topic(account.username), json.dumps(command))
        assert sent.returncode == 0, sent.stderr
        received = await device.next_command(timeout_s=10)
        assert str(received.command_id) == command["command_id"]
    finally:
        await device.close(offline=False)
        part.stop()


async def test_a_client_with_another_devices_client_id_neither_drops_it_nor_acts_as_it(
    tmp_path: Path,
) -> None:
    """Device B connects with device A's client id (and B's own credential): the device listener makes
    the client id B's username, so A's session is not taken over (A stays connected and keeps getting its
    commands) and B gets nothing of A's and can publish nothing as A."""
    broker = broker_on_free_ports(tmp_path / "mqtt", tmp_path)
    part = start_healthy(broker.process(), 30)
    a, b = admit_devices(broker, "lock-a", "lock-b")
    watcher = Subscriber(broker, broker.admin, ["hearth/devices/lock-a/#"], tmp_path / "watch.out").start()
    device_a = DeviceConnection(username=a.username, password=a.password, port=broker.port)
    # A device, as B is: connected as a hub, its birth on a hub's topic is refused for a device's
    # credential and the broker drops the connection each time, so its publishes waited 5-34 s for one
    # that lived long enough (measured); the client id is what this test is about.
    intruder = DeviceConnection(
        username=b.username, password=b.password, port=broker.port, client_id=a.username
    )
    dropped: list[object] = []
    try:
        await device_a.connect()
        await device_a.link.subscribed()
        on_disconnect = device_a.link.client.on_disconnect

        def dropping(*args: object) -> None:
            dropped.append(args)
            on_disconnect(*args)

        device_a.link.client.on_disconnect = dropping
        await intruder.connect()  # accepted: B's credential is good, and its client id becomes B's
        intruder.link.subscribe("hearth/devices/lock-a/commands")
        await asyncio.sleep(0.5)
        await intruder.publish_raw("hearth/devices/lock-a/state", b'{"forged": true}')
        command = {"command_id": str(uuid.uuid4()), "name": "unlock", "params": {}}
        command["expires_at"] = "2030-01-01T00:00:00Z"
        sent = publish(broker, broker.admin, "hearth/devices/lock-a/commands", json.dumps(command))
        assert sent.returncode == 0, sent.stderr
        received = await device_a.next_command(timeout_s=10)  # A is still there, and gets its command
        assert str(received.command_id) == command["command_id"]
        await watcher.wait_for_line(command["command_id"])
        await asyncio.sleep(0.5)
        assert dropped == [] and device_a.link.client.is_connected
        assert intruder.commands.empty()  # nothing of A's reached B
        assert not any("forged" in line for line in watcher.lines()), watcher.lines()
    finally:
        watcher.stop()
        await intruder.close(offline=False)
        await device_a.close(offline=False)
        part.stop()
