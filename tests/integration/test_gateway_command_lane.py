"""An ack never waits behind telemetry in the gateway (issue 21, the contract's "Commands before
telemetry", the gateway's half).

The broker holds a gateway's persistent sessions while it is away: ``FLOOD`` state reports wait in its
telemetry session, then one report more (the control) and, after it, an ack carrying its command's report.
When the gateway starts, the ack comes through its command-lane connection and is on the command lane
before most of the flood is on the telemetry lane. The control shows what one connection would do: a
message queued after the flood on the flood's connection reaches Kafka after every one of the flood's
reports, and the ack, published after it, reaches Kafka before it. The measure is an order (the records'
timestamps, taken as the gateway queues them), not a time, so the machine's speed does not decide it.
(Measured while writing it: with both connections connecting at once, 4,002 of the 10,000 reports were on
telemetry before the ack, which then waited in the gateway's own event loop behind the reports already
read; the gateway now connects its lane first, and none was.)
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from hearth_device import Command
from hearth_device_gateway.app import make_app
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import (
    AcknowledgeCommand,
    ReportAvailability,
    ReportState,
    decode_inbound,
    utcnow,
)
from tests.support.gateway_sessions import sessions_left_behind
from tests.support.mqtt_devices import platform_hub, read_topic

pytestmark = pytest.mark.integration

DEVICES = 40
FLOOD = 10_000  # state reports waiting for the gateway: 250 per device


async def test_an_ack_overtakes_a_flood_of_reports_waiting_for_the_gateway(
    stack: StackSettings, mosquitto: MosquittoBroker
) -> None:
    settings = await sessions_left_behind(stack, mosquitto)
    hub = await platform_hub(mosquitto)
    prefix = uuid.uuid4().hex[:6]
    flooding, control = [f"flood-{prefix}-{i}" for i in range(DEVICES)], f"control-{prefix}"
    commanded = f"commanded-{prefix}"
    try:
        hub.add_device(commanded)  # its `online` waits in the lane's session, ahead of the ack
        await asyncio.gather(
            *(
                hub.report({"ambient_c": 20.0 + seq / 100}, device_id=device, seq=seq)
                for seq in range(1, FLOOD // DEVICES + 1)
                for device in flooding
            )
        )
        await hub.report({"ambient_c": 19.0}, device_id=control, seq=1)  # after the flood, on its session
        command = Command(commanded, uuid.uuid4(), "set_target_temperature", {"target_c": 23.0}, utcnow())
        await hub.ack(command, report={"target_c": 23.0})  # after the control
    finally:
        await hub.close()

    gateway = make_app(settings)
    stop = asyncio.Event()
    running = asyncio.create_task(gateway.run(stop))
    try:
        servers, topics = stack.kafka_bootstrap_servers, stack.topics
        telemetry = await read_topic(servers, topics.inbox, lambda r: len(r) >= FLOOD + 1, timeout_s=120)
        lane = await read_topic(
            servers, topics.command_lane, lambda r: sum(x.key == commanded.encode() for x in r) >= 3
        )
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)

    [ack, report] = [r for r in lane if not isinstance(decode_inbound(r.value), ReportAvailability)]
    assert isinstance(decode_inbound(ack.value), AcknowledgeCommand)
    assert isinstance(answer := decode_inbound(report.value), ReportState) and answer.state == {
        "target_c": 23.0
    }
    flood = [r.timestamp for r in telemetry if r.key != control.encode()]
    [control_at] = [r.timestamp for r in telemetry if r.key == control.encode()]
    assert len(flood) == FLOOD
    # The control: behind the flood on its connection, it reached Kafka after all of it, and after the ack.
    assert sum(at <= control_at for at in flood) == FLOOD
    assert ack.timestamp < control_at
    # The ack: on its own connection, it reached the command lane before most of the flood was on telemetry.
    before_the_ack = sum(at < ack.timestamp for at in flood)
    assert before_the_ack < FLOOD // 2, (
        f"{before_the_ack} of {FLOOD} reports were on telemetry before the ack"
    )
