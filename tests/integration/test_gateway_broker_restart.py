"""The gateway's subscriptions outlive a restart of its broker (service/slices.py): a report a device
publishes after the broker came back and before the gateway did waits in the gateway's persistent session
and reaches the inbox. With MQTT 5 shared subscriptions, the gateways' way before, Mosquitto restored no
subscription for the session, answered the report's PUBACK with reason 16 (no matching subscribers) and
dropped it: test_kill_parts lost a command's answering report so."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from hearth_device_gateway.app import make_app
from hearth_devstack.launch.server_startup import MOSQUITTO_STARTUP_S, start_healthy, start_mosquitto
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import ReportState, decode_inbound
from tests.support.gateway_sessions import sessions_left_behind
from tests.support.mqtt_devices import platform_hub, read_topic

pytestmark = pytest.mark.integration


async def test_a_report_published_after_a_broker_restart_before_the_gateway_is_back_reaches_the_inbox(
    stack: StackSettings, tmp_path: Path
) -> None:
    started = start_mosquitto(tmp_path)
    broker, process = started.server, started.process
    try:
        settings = await sessions_left_behind(stack, broker)
        process.stop()  # SIGTERM: Mosquitto saves its sessions, then it comes back from them
        process = start_healthy(broker.process(), MOSQUITTO_STARTUP_S)

        device_id = f"restart-{uuid.uuid4().hex[:8]}"
        hub = await platform_hub(broker)
        try:
            await hub.report({"ambient_c": 19.5}, device_id=device_id, seq=1)  # the broker has it
        finally:
            await hub.close()

        stop = asyncio.Event()
        running = asyncio.create_task(make_app(settings).run(stop))
        try:
            records = await read_topic(
                stack.kafka_bootstrap_servers,
                stack.topics.inbox,
                lambda r: any(x.key == device_id.encode() for x in r),
                timeout_s=60,
            )
        finally:
            stop.set()
            await asyncio.wait_for(running, 30)
        [report] = [decode_inbound(r.value) for r in records if r.key == device_id.encode()]
        assert isinstance(report, ReportState) and (report.device_seq, report.state) == (
            1,
            {"ambient_c": 19.5},
        )
    finally:
        process.stop()
