"""The device side of the protocol, played by a test over the real broker: take dispatched commands
from the device-bound topic, send acks and state reports to the inbox.

A test seam for the device actor only: real devices (and the simulator) go through MQTT and the device
gateway (tests/support/mqtt_devices.py, the hearth_device SDK); nothing outside the platform writes Kafka.

A device speaks only once its registration is in the journal, as a real one can (it connects with a
credential the broker loads from the journal). The command API answers 201 when it has written the
registration request, and the inbox's telemetry lane is not the command lane it went on, so a report
sent at once may reach the actor before the registration does, and the actor makes nothing of a report
from a device it does not know: the report is gone, and the device never seen online (a chaos run lost
every command to one device that way). So ``report`` and ``ack`` wait for the device's
``device.registered`` fact, read from the journal since the link started: register devices after the
link starts."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

from aiokafka import AIOKafkaConsumer

from hearth_shared.adapters.kafka import KafkaWriter, topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import (
    DeviceCommand,
    DeviceRegistered,
    MalformedRecord,
    decode_device_command,
    decode_event,
)
from tests.support.inbox_requests import ack_request, report_request


class DeviceLink:
    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.writer = KafkaWriter(settings.kafka_bootstrap_servers, settings.topics, client_id="test-device")
        self.inbox: dict[str, asyncio.Queue[DeviceCommand]] = {}
        self.registered: dict[str, asyncio.Event] = {}  # device id -> set once its registration is journaled
        self.seq = itertools.count(1)

    async def __aenter__(self) -> DeviceLink:
        await self.writer.start()
        self.consumer = await self._from_the_end(self.settings.topics.device_commands)
        self.journal = await self._from_the_end(self.settings.topics.journal)
        self.tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._follow_registrations())]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self.tasks:
            task.cancel()
        await self.consumer.stop()
        await self.journal.stop()
        await self.writer.stop()

    async def _from_the_end(self, topic: str) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.settings.kafka_bootstrap_servers)
        await consumer.start()
        tps = await topic_partitions(consumer, topic)
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:  # resolve the end offsets now, before anything this link waits for is written
            await consumer.position(tp)
        return consumer

    async def _read(self) -> None:
        async for record in self.consumer:
            command = decode_device_command(record.value)
            self.inbox.setdefault(command.device_id, asyncio.Queue()).put_nowait(command)

    async def _follow_registrations(self) -> None:
        async for record in self.journal:
            if record.value is None or b"device.registered" not in record.value:
                continue  # the session's journal is shared: most of it is other tests' facts
            try:
                fact = decode_event(record.value)
            except MalformedRecord:
                continue  # the poison tests plant such records on the journal
            if isinstance(fact, DeviceRegistered):
                self.registered.setdefault(fact.device_id, asyncio.Event()).set()

    async def _registration(self, device_id: str, timeout_s: float = 30.0) -> None:
        """Return once ``device_id``'s registration is journaled (module docstring)."""
        try:
            await asyncio.wait_for(self.registered.setdefault(device_id, asyncio.Event()).wait(), timeout_s)
        except TimeoutError:
            raise AssertionError(
                f"{device_id}: no device.registered in the journal {timeout_s:g} s since this link started"
                " (a device speaks only once registered: register it after the link starts)"
            ) from None

    async def next_command(self, device_id: str, timeout_s: float = 20.0) -> DeviceCommand:
        queue = self.inbox.setdefault(device_id, asyncio.Queue())
        return await asyncio.wait_for(queue.get(), timeout_s)

    async def report(self, device_id: str, state: dict[str, Any], *, seq: int | None = None) -> int:
        seq = next(self.seq) if seq is None else seq
        await self._registration(device_id)
        await self.writer.send_requests(report_request(device_id, seq, **state))
        return seq

    async def ack(self, device_id: str, command_id: uuid.UUID, *, ok: bool = True, reason: str = "") -> None:
        await self._registration(device_id)
        await self.writer.send_requests(ack_request(device_id, command_id, ok=ok, reason=reason))
