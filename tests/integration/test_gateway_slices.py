"""Two device-gateway processes with device slices (``HEARTH_DEVICE_GATEWAY_SLICES=2``, issue 21): every
device's reports, sent back to back without waiting, reach the inbox once each and in the device's
order, on the real broker and Kafka. With shared subscriptions instead, consecutive reports of one
device may go through both gateways and land in either order (hearth_device_gateway.service.slices).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from hearth_device import DeviceConnection
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import MalformedRecord, ReportState, decode_inbound
from tests.support.gateway_process import gateway
from tests.support.topics import read_topic
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

DEVICES = 20
REPORTS = 40  # per device, published back to back


async def test_sliced_gateways_keep_each_devices_reports_in_order_once(
    stack: StackSettings, mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    device_ids = [f"slice-{uuid.uuid4().hex[:6]}-{i}" for i in range(DEVICES)]
    parts = [
        gateway(
            stack,
            mosquitto,
            tmp_path,
            f"{stack.topic_prefix}-slice-{part}",
            env={"HEARTH_DEVICE_GATEWAY_SLICES": "2", "HEARTH_DEVICE_GATEWAY_SLICE": str(part)},
        )
        for part in (0, 1)
    ]
    account = mosquitto.admin
    hub = DeviceConnection(
        username=account.username,
        password=account.password,
        port=mosquitto.platform_port,
        hub=True,
        client_id=f"{stack.topic_prefix}-slice-hub",
    )
    try:
        await hub.connect()
        for device_id in device_ids:
            hub.add_device(device_id)
        for seq in range(1, REPORTS + 1):  # round robin over the devices, none waiting for the gateways
            await asyncio.gather(
                *(hub.report({"ambient_c": 15.0 + seq / 10}, device_id=d, seq=seq) for d in device_ids)
            )
        reports: dict[str, list[int]] = {}

        async def all_in() -> bool:
            reports.clear()
            for found in await read_topic(stack, stack.topics.inbox, _report):
                if found is not None and found[0] in device_ids:
                    reports.setdefault(found[0], []).append(found[1])
            return sum(map(len, reports.values())) >= DEVICES * REPORTS

        await eventually(all_in, "every report in the inbox", timeout_s=60, every_s=0.5)
    finally:
        await hub.close(offline=False)
        for part in reversed(parts):
            part.stop()
    for device_id in device_ids:
        assert reports[device_id] == list(range(1, REPORTS + 1)), f"{device_id}: out of order or twice"


def _report(value: bytes | None) -> tuple[str, int] | None:
    """A report's (device, seq); None for other records (and records other tests planted unreadable)."""
    try:
        request = decode_inbound(value or b"")
    except MalformedRecord:
        return None
    return (request.device_id, request.device_seq) if isinstance(request, ReportState) else None
