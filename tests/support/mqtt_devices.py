"""Devices over the real MQTT broker, for tests: register one through the command API and connect with
the credential it was issued (the SDK), and read a Kafka topic (mosquitto_pub/sub: mosquitto_clients.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer
from gmqtt.mqtt.handler import MQTTConnectError

from hearth_device import DeviceConnection
from hearth_devstack.mosquitto import MosquittoBroker
from hearth_shared.kafka import topic_partitions


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
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        device = DeviceConnection(username=device_id, password=password, port=mosquitto.port, **options)
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
