"""Devices over the real MQTT broker, for tests: register one through the command API and connect with
the credential it was issued (the SDK), read a Kafka topic, and play a device with mosquitto_pub/sub."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid
from collections.abc import Callable
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer
from gmqtt.mqtt.handler import MQTTConnectError

from hearth.stack.mosquitto import MosquittoBroker
from hearth_device import DeviceConnection
from hearth_shared.kafka import topic_partitions

MOSQUITTO_PUB = shutil.which("mosquitto_pub") or "/usr/bin/mosquitto_pub"
MOSQUITTO_SUB = shutil.which("mosquitto_sub") or "/usr/bin/mosquitto_sub"


async def register(api: httpx.AsyncClient, home: str, device_type: str = "thermostat") -> tuple[str, str]:
    """Register a device; returns its id and the MQTT password it was issued (this once)."""
    device_id = f"{device_type}-{uuid.uuid4().hex[:10]}"
    body = {"device_id": device_id, "home_id": home, "type": device_type, "name": device_type}
    response = await api.post("/v1/devices", json=body)
    assert response.status_code == 201, response.text
    credentials = response.json()["credentials"]
    assert credentials["username"] == device_id
    return device_id, str(credentials["password"])


async def connected(
    mosquitto: MosquittoBroker, device_id: str, password: str, timeout_s: float = 30.0
) -> DeviceConnection:
    """The device connected with its credential (retried until the broker has read the new password)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        device = DeviceConnection(username=device_id, password=password, port=mosquitto.port)
        try:
            await device.connect()
            return device
        except (MQTTConnectError, ConnectionError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def read_topic(
    bootstrap: str, topic: str, done: Callable[[list[Any]], bool], timeout_s: float = 30.0
) -> list[Any]:
    """Records of ``topic`` from its first offset until ``done(records)`` holds (fails at the timeout)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = await topic_partitions(consumer, topic)
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        records: list[Any] = []
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not done(records):
            assert asyncio.get_running_loop().time() < deadline, f"{topic}: {len(records)} records, not done"
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                records += batch
        return records
    finally:
        await consumer.stop()


def mosquitto_pub(
    mosquitto: MosquittoBroker,
    username: str,
    password: str,
    topic: str,
    payload: str,
    *,
    retain: bool = False,
) -> None:
    """Publish one QoS 1 message with Debian's mosquitto_pub (a client nobody here wrote)."""
    argv = [MOSQUITTO_PUB, "-h", mosquitto.host, "-p", str(mosquitto.port), "-u", username, "-P", password]
    argv += ["-i", f"{username}-pub-{uuid.uuid4().hex[:6]}", "-q", "1", "-t", topic, "-m", payload]
    done = subprocess.run(argv + ["-r"] * retain, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, f"mosquitto_pub exited {done.returncode}: {done.stderr}"


def mosquitto_sub(
    mosquitto: MosquittoBroker, username: str, password: str, topic: str, *extra: str
) -> subprocess.Popen[str]:
    """mosquitto_sub as the device (client id = username, as the SDK), printing each message on a line."""
    argv = [MOSQUITTO_SUB, "-h", mosquitto.host, "-p", str(mosquitto.port), "-u", username, "-P", password]
    argv += ["-i", username, "-q", "1", "-t", topic, *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
