"""The device side of the protocol, played by a test over the real broker: take dispatched commands
from the device-bound topic, send acks and state reports to the inbox.

A test seam for the device actor only: real devices (and the simulator) go through MQTT and the device
gateway (tests/support/mqtt_devices.py, the hearth_device SDK); nothing outside the platform writes Kafka."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

from aiokafka import AIOKafkaConsumer

from hearth_shared.adapters.kafka import KafkaWriter, topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import DeviceCommand, decode_device_command
from tests.support.inbox_requests import ack_request, report_request


class DeviceLink:
    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.writer = KafkaWriter(settings.kafka_bootstrap_servers, settings.topics, client_id="test-device")
        self.inbox: dict[str, asyncio.Queue[DeviceCommand]] = {}
        self.seq = itertools.count(1)

    async def __aenter__(self) -> DeviceLink:
        await self.writer.start()
        topic = self.settings.topics.device_commands
        self.consumer = AIOKafkaConsumer(bootstrap_servers=self.settings.kafka_bootstrap_servers)
        await self.consumer.start()
        tps = await topic_partitions(self.consumer, topic)
        self.consumer.assign(tps)
        await self.consumer.seek_to_end(*tps)
        for tp in tps:  # resolve the end offsets now, before any command is dispatched
            await self.consumer.position(tp)
        self.task = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.task.cancel()
        await self.consumer.stop()
        await self.writer.stop()

    async def _read(self) -> None:
        async for record in self.consumer:
            command = decode_device_command(record.value)
            self.inbox.setdefault(command.device_id, asyncio.Queue()).put_nowait(command)

    async def next_command(self, device_id: str, timeout_s: float = 20.0) -> DeviceCommand:
        queue = self.inbox.setdefault(device_id, asyncio.Queue())
        return await asyncio.wait_for(queue.get(), timeout_s)

    async def report(self, device_id: str, state: dict[str, Any], *, seq: int | None = None) -> int:
        seq = next(self.seq) if seq is None else seq
        await self.writer.send_requests(report_request(device_id, seq, **state))
        return seq

    async def ack(self, device_id: str, command_id: uuid.UUID, *, ok: bool = True, reason: str = "") -> None:
        await self.writer.send_requests(ack_request(device_id, command_id, ok=ok, reason=reason))
