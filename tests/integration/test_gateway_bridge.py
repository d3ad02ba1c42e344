"""The device gateway alone, in this process, between the real broker and real Kafka (its own topics):
what a device publishes becomes inbox requests with derived ids, what it cannot accept becomes dead
letters and errors messages, and dispatched commands reach the device with their offsets committed only
then. (test_device_gateway.py runs it with the whole platform.)"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import msgspec
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from hearth_device import Command, DeviceConnection
from hearth_device_gateway.app import DeviceGateway, make_app
from hearth_device_gateway.service.edge import request_id
from hearth_device_gateway.settings import DeviceGatewaySettings
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.adapters.kafka import KafkaWriter
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import (
    AcknowledgeCommand,
    DeadLetter,
    DeviceCommand,
    Inbound,
    ReportAvailability,
    ReportState,
    decode_inbound,
    encode,
    utcnow,
)
from hearth_shared.schema.mqtt import acks_topic, state_topic
from tests.support.mqtt_devices import platform_hub, read_topic
from tests.support.waiting import eventually, poll_until

pytestmark = pytest.mark.integration


@pytest.fixture
async def gateway(stack: StackSettings, mosquitto: MosquittoBroker) -> AsyncIterator[DeviceGateway]:
    settings = DeviceGatewaySettings(
        mqtt_port=mosquitto.platform_port,
        mqtt_password=mosquitto.admin.password,
        instance=f"{stack.topic_prefix}-1",
        stack=stack,
    )
    gateway = make_app(settings)
    stop = asyncio.Event()
    running = asyncio.create_task(gateway.run(stop))
    ready = asyncio.create_task(gateway.ready.wait())
    await asyncio.wait({running, ready}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    assert gateway.ready.is_set(), running.exception() if running.done() else "not ready in 60 s"
    yield gateway
    stop.set()
    await asyncio.wait_for(running, 30)


@pytest.fixture
async def hub(mosquitto: MosquittoBroker) -> AsyncIterator[DeviceConnection]:
    """A hub on Hearth's own account (it may act for any device id: no registration needed here)."""
    connection = await platform_hub(mosquitto)
    yield connection
    await connection.close()


async def test_reports_and_availability_become_inbox_requests_on_their_lanes_with_derived_ids(
    stack: StackSettings, gateway: DeviceGateway, hub: DeviceConnection
) -> None:
    device_id = f"dev-{uuid.uuid4().hex[:8]}"
    hub.add_device(device_id)  # says `online` (retained)
    await hub.report({"ambient_c": 20.0}, device_id=device_id, seq=7)
    await hub.report({"ambient_c": 20.0}, device_id=device_id, seq=7)  # as a redelivery would
    # The session's broker is shared: retained messages of other tests' devices reach this gateway too.
    key = device_id.encode()
    servers, topics = stack.kafka_bootstrap_servers, stack.topics
    telemetry = await read_topic(servers, topics.inbox, lambda r: sum(x.key == key for x in r) >= 2)
    lane = await read_topic(servers, topics.command_lane, lambda r: sum(x.key == key for x in r) >= 1)
    # Each on its lane: the state reports on telemetry, the availability on the command lane.
    reports = [q for r in telemetry if (q := decode_inbound(r.value)).device_id == device_id]
    requests = [q for r in lane if (q := decode_inbound(r.value)).device_id == device_id]
    assert all(isinstance(r, ReportState) for r in reports) and len(reports) == 2
    assert [(r.request_id, r.device_seq, r.state) for r in reports if isinstance(r, ReportState)] == 2 * [
        (request_id(device_id, "state", "7"), 7, {"ambient_c": 20.0})
    ]
    assert [r.online for r in requests if isinstance(r, ReportAvailability)] == [True]


def lane_requests(records: list[Any], device_id: str) -> list[Inbound]:
    return [q for r in records if (q := decode_inbound(r.value)).device_id == device_id]


async def test_acks_and_availability_come_through_the_lane_connection_an_acks_report_after_its_ack(
    stack: StackSettings, gateway: DeviceGateway, hub: DeviceConnection
) -> None:
    device_id = f"dev-{uuid.uuid4().hex[:8]}"
    telemetry, lane = gateway.uplinks
    before = (telemetry.accepted, lane.accepted)
    hub.add_device(device_id)  # `online` (retained)
    command = Command(device_id, uuid.uuid4(), "set_target_temperature", {"target_c": 22.5}, utcnow())
    seq = await hub.ack(command, report={"target_c": 22.5})
    await hub.ack(dataclasses.replace(command, command_id=uuid.uuid4()), ok=False, reason="jammed")

    key = device_id.encode()
    records = await read_topic(
        stack.kafka_bootstrap_servers, stack.topics.command_lane, lambda r: sum(x.key == key for x in r) >= 4
    )
    online, ack, report, failed = lane_requests(records, device_id)
    assert isinstance(online, ReportAvailability) and online.online
    assert isinstance(ack, AcknowledgeCommand) and (ack.command_id, ack.ok) == (command.command_id, True)
    assert isinstance(report, ReportState) and (report.device_seq, report.state) == (seq, {"target_c": 22.5})
    assert report.request_id == request_id(device_id, "state", str(seq)), "as a state message of that seq"
    assert isinstance(failed, AcknowledgeCommand) and (failed.ok, failed.reason) == (False, "jammed")
    # They came through the command lane's own MQTT connection, none through the telemetry one (the lane's
    # count may hold more: other tests' retained availability reaches this gateway too). A batch is counted
    # once the broker's acks are back, which can be after a reader already sees its records.
    await eventually(lambda: lane.accepted - before[1] >= 3, "the lane connection's three requests counted")
    assert telemetry.accepted == before[0]


async def test_a_bad_report_in_an_ack_is_refused_with_its_reason_and_the_ack_goes_through(
    stack: StackSettings, gateway: DeviceGateway, hub: DeviceConnection
) -> None:
    device_id = f"dev-{uuid.uuid4().hex[:8]}"
    hub.add_device(device_id)
    command_id = uuid.uuid4()
    body = {"command_id": str(command_id), "result": "ok", "report": {"seq": 3, "at": "2026-01-01T00:00:00Z"}}
    await hub.publish_raw(acks_topic(device_id), json.dumps(body).encode())

    error = await hub.next_error(timeout_s=30)
    assert (error.device_id, error.error, error.topic) == (device_id, "invalid_fields", acks_topic(device_id))
    assert error.reason.startswith("ack report: ")
    letters = await read_topic(
        stack.kafka_bootstrap_servers, stack.topics.dead_letters, lambda r: len(r) >= 1
    )
    letter = msgspec.json.decode(letters[0].value, type=DeadLetter)
    assert (letter.source_topic, letter.reason, letter.key) == (
        acks_topic(device_id),
        "invalid_fields",
        device_id,
    )
    key = device_id.encode()
    records = await read_topic(
        stack.kafka_bootstrap_servers, stack.topics.command_lane, lambda r: sum(x.key == key for x in r) >= 2
    )
    [ack] = [q for q in lane_requests(records, device_id) if not isinstance(q, ReportAvailability)]
    assert isinstance(ack, AcknowledgeCommand) and (ack.command_id, ack.ok) == (command_id, True)


async def test_a_bad_payload_is_dead_lettered_and_answered_on_the_errors_topic(
    stack: StackSettings, gateway: DeviceGateway, hub: DeviceConnection
) -> None:
    device_id = f"dev-{uuid.uuid4().hex[:8]}"
    hub.add_device(device_id)
    await hub.publish_raw(state_topic(device_id), b'{"seq": -1, "at": "2026-01-01T00:00:00Z", "state": {}}')
    error = await hub.next_error(timeout_s=30)
    assert (error.device_id, error.error, error.topic) == (
        device_id,
        "invalid_fields",
        state_topic(device_id),
    )
    records = await read_topic(
        stack.kafka_bootstrap_servers, stack.topics.dead_letters, lambda r: len(r) >= 1
    )
    letter = msgspec.json.decode(records[0].value, type=DeadLetter)
    assert (letter.source_topic, letter.reason, letter.key) == (
        state_topic(device_id),
        "invalid_fields",
        device_id,
    )
    await hub.report({"ambient_c": 21.0}, device_id=device_id)  # still connected, still heard
    await read_topic(
        stack.kafka_bootstrap_servers,
        stack.topics.inbox,
        lambda r: any(isinstance(decode_inbound(x.value), ReportState) for x in r),
    )


async def test_dispatched_commands_reach_the_device_and_only_then_are_committed(
    stack: StackSettings, gateway: DeviceGateway, hub: DeviceConnection
) -> None:
    device_id = f"dev-{uuid.uuid4().hex[:8]}"
    hub.add_device(device_id)
    await asyncio.sleep(0.5)  # the hub's subscription to its commands topic
    now = utcnow()
    fresh = DeviceCommand(
        command_id=uuid.uuid4(),
        device_id=device_id,
        name="lock",
        params={},
        expires_at=now + timedelta(minutes=1),
    )
    stale = msgspec.structs.replace(fresh, command_id=uuid.uuid4(), expires_at=now - timedelta(seconds=1))
    journal = KafkaWriter(stack.kafka_bootstrap_servers, stack.topics, client_id="test")
    await journal.start()
    try:
        for command in (stale, fresh):
            await journal.producer.send_and_wait(
                stack.topics.device_commands, encode(command), key=device_id.encode()
            )
    finally:
        await journal.stop()
    received = await hub.next_command(timeout_s=30)
    assert (received.device_id, received.command_id, received.name) == (device_id, fresh.command_id, "lock")
    assert hub.commands.empty()  # the expired one was not sent

    settings = gateway.settings
    consumer = AIOKafkaConsumer(
        bootstrap_servers=stack.kafka_bootstrap_servers, group_id=settings.kafka_group()
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(stack.topics.device_commands, p) for p in range(12)]
        await poll_until(
            lambda: asyncio.gather(*(consumer.committed(tp) for tp in partitions)),
            lambda committed: sum(c or 0 for c in committed) == 2,
            "both dispatched commands committed",
            timeout_s=30,
            every_s=0.2,
        )
    finally:
        await consumer.stop()
