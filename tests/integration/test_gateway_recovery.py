"""Two device-gateway processes share the devices' messages; one is killed with SIGKILL under load and
started again. Nothing a device was told was delivered is lost, and nothing is recorded twice: every
report reaches the journal exactly once, in order (counted fact by fact), on the real broker, Kafka and
device actor.

Each device sends its next report once the previous one is in the inbox (a closed loop): MQTT 5 shared
subscriptions hand consecutive messages of one device to different gateways, and a report held by the
killed gateway until it comes back would otherwise arrive after newer ones and be dropped as older
(which is right for a device, and not what this test counts).
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from hearth_device import DeviceConnection
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.adapters.kafka import KafkaWriter, topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import (
    RegisterDevice,
    ReportState,
    StateReported,
    decode_inbound,
    new_id,
    utcnow,
)
from tests.integration.test_actor_recovery import journal_with_reports, worker
from tests.support.gateway_process import gateway

pytestmark = pytest.mark.integration

DEVICES = 30
REPORTS = 30  # per device


class InboxWatch:
    """Follows the inbox: which (device, seq) reports it holds, and how many copies."""

    def __init__(self, stack: StackSettings) -> None:
        self.stack = stack
        self.copies: dict[tuple[str, int], int] = defaultdict(int)
        self.arrived: dict[tuple[str, int], asyncio.Event] = defaultdict(asyncio.Event)

    async def run(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.stack.kafka_bootstrap_servers, enable_auto_commit=False
        )
        await consumer.start()
        try:
            partitions = await topic_partitions(consumer, self.stack.topics.inbox)
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            while True:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    for record in records:
                        request = decode_inbound(record.value)
                        if isinstance(request, ReportState):
                            key = (request.device_id, request.device_seq)
                            self.copies[key] += 1
                            self.arrived[key].set()
        finally:
            await consumer.stop()


async def register(stack: StackSettings, device_ids: list[str]) -> None:
    """Registrations straight onto the inbox (the command API's part; not what this test is about)."""
    writer = KafkaWriter(stack.kafka_bootstrap_servers, stack.topics, client_id="test-register")
    await writer.start()
    try:
        for device_id in device_ids:
            await writer.send_requests(
                RegisterDevice(
                    request_id=new_id(),
                    device_id=device_id,
                    sent_at=utcnow(),
                    home_id="home-kill",
                    device_type="thermostat",
                    name=device_id,
                )
            )
    finally:
        await writer.stop()


async def play(
    hub: DeviceConnection, watch: InboxWatch, device_id: str, progress: list[int], a_third: asyncio.Event
) -> None:
    for seq in range(1, REPORTS + 1):
        await hub.report({"ambient_c": 15.0 + seq / 10}, device_id=device_id, seq=seq)
        await asyncio.wait_for(watch.arrived[(device_id, seq)].wait(), 120)
        progress[0] += 1
        if progress[0] >= DEVICES * REPORTS // 3:
            a_third.set()


async def test_a_gateway_killed_under_load_loses_and_doubles_nothing(
    stack: StackSettings, mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    device_ids = [f"kill-{uuid.uuid4().hex[:6]}-{i}" for i in range(DEVICES)]
    parts = [worker(stack, tmp_path, "actor")]
    parts += [gateway(stack, mosquitto, tmp_path, f"{stack.topic_prefix}-gw-{n}") for n in ("a", "b")]
    watch = InboxWatch(stack)
    watching = asyncio.create_task(watch.run())
    account = mosquitto.admin
    hub = DeviceConnection(
        username=account.username,
        password=account.password,
        port=mosquitto.platform_port,
        hub=True,
        client_id=f"{stack.topic_prefix}-hub",
    )
    try:
        await register(stack, device_ids)
        await hub.connect()
        for device_id in device_ids:
            hub.add_device(device_id)
        progress, a_third = [0], asyncio.Event()
        playing = asyncio.gather(*(play(hub, watch, d, progress, a_third) for d in device_ids))
        await asyncio.wait_for(a_third.wait(), 300)
        victim = parts[1].proc
        assert victim is not None
        os.killpg(victim.pid, signal.SIGKILL)  # no goodbye: its unacknowledged messages wait in its session
        victim.wait(10)
        at_kill = progress[0]
        await asyncio.sleep(2)
        restart = asyncio.to_thread(gateway, stack, mosquitto, tmp_path, f"{stack.topic_prefix}-gw-a")
        parts.append(await restart)  # the same instance, so the same MQTT session
        await asyncio.wait_for(playing, 300)
        assert at_kill < DEVICES * REPORTS, "the kill happened under load"

        assert set(watch.copies) == {(d, s) for d in device_ids for s in range(1, REPORTS + 1)}
        events = await journal_with_reports(stack, DEVICES * REPORTS, timeout_s=120)
    finally:
        await hub.close(offline=False)
        watching.cancel()
        for part in reversed(parts):
            part.stop()

    by_device: dict[str, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for event in events:
        by_device[event.device_id][event.version].append(event)
    assert set(by_device) == set(device_ids)
    for device_id, versions in by_device.items():
        assert sorted(versions) == list(range(1, max(versions) + 1)), f"{device_id}: a gap in its versions"
        assert all(len({e.event_id for e in copies}) == 1 for copies in versions.values()), device_id
        facts = [copies[0] for _, copies in sorted(versions.items())]
        seqs = [e.payload.device_seq for e in facts if isinstance(e, StateReported)]
        assert seqs == list(range(1, REPORTS + 1)), f"{device_id}: a report lost or recorded twice"
