"""Devices over the real MQTT broker, for tests: register one through the command API and connect with
the credential it was issued (the SDK), a hub on Hearth's own account, and read a Kafka topic
(mosquitto_pub/sub: mosquitto_clients.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer
from gmqtt.mqtt.handler import MQTTConnectError

from hearth_device import DeviceConnection
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.adapters.kafka import topic_partitions
from tests.support.waiting import eventually


async def register(api: httpx.AsyncClient, home: str, device_type: str = "thermostat") -> tuple[str, str]:
    """Register a device; returns its id and the MQTT password it was issued (this once)."""
    body = {"home_id": home, "type": device_type, "name": device_type}  # the server names it
    response = await api.post("/v1/devices", json=body)
    assert response.status_code == 201, response.text
    device_id = str(response.json()["device_id"])
    credentials = response.json()["credentials"]
    assert credentials["username"] == device_id
    return device_id, str(credentials["password"])


async def connected(
    mosquitto: MosquittoBroker, device_id: str, password: str, timeout_s: float = 30.0, **options: Any
) -> DeviceConnection:
    """The device connected with its credential (retried until the broker has read the new password);
    ``options`` go to ``DeviceConnection`` (e.g. ``backoff_max_s``)."""
    connections: list[DeviceConnection] = []

    async def connects() -> bool:
        device = DeviceConnection(username=device_id, password=password, port=mosquitto.port, **options)
        try:
            await device.connect()
        except (MQTTConnectError, ConnectionError):
            return False
        connections.append(device)
        return True

    await eventually(connects, f"{device_id} connected with its credential", timeout_s=timeout_s, every_s=0.2)
    return connections[0]


async def platform_hub(broker: MosquittoBroker) -> DeviceConnection:
    """A hub on Hearth's own account, connected (it may act for any device id: no registration needed)."""
    hub = DeviceConnection(
        username=broker.admin.username,
        password=broker.admin.password,
        port=broker.platform_port,
        hub=True,
        client_id=f"test-hub-{uuid.uuid4().hex[:8]}",
    )
    await hub.connect()
    return hub


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

        async def read_until_done() -> bool:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                records.extend(batch)
            return done(records)

        if not done(records):
            await eventually(
                read_until_done,
                f"{topic} read until done",
                timeout_s=timeout_s,
                every_s=0,
                shown=records.__len__,
            )
        return records
    finally:
        await consumer.stop()
