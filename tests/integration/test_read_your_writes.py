"""Read what you were told: a command the command API answered `converged` (with `?wait=converged`) is
read at the query API, right after, in the state it converged to, with `?command_id=` or with
`?min_version=` and the answer's `twin_version`.

The test plays a light over the real broker through the real services. Its transition sends many
reports before the one that converges, as a bulb reporting its way does: the command API's book skips
them undecoded, the projector writes each one, so the views trail the command API's answer by those
reports (how the user saw brightness 21 and 3481 K after `converged`, issue 21 point 5)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.commands import send
from tests.support.device_link import DeviceLink
from tests.support.inbox_requests import ack_request, report_request
from tests.support.platform import Platform
from tests.support.registration import register_device
from tests.support.waiting import twin_when

pytestmark = pytest.mark.integration

BEFORE = {"power": "off", "brightness_pct": 21, "color_temp_k": 3481}
ASKED = {"brightness_pct": 40, "color_temp_k": 3000, "transition_s": 2}
REPORTS_ON_THE_WAY = 800


@pytest.fixture
async def bulb(platform: Platform) -> AsyncIterator[DeviceLink]:
    async with DeviceLink(platform.settings) as link:
        yield link


async def converged_light(
    api: httpx.AsyncClient, query: httpx.AsyncClient, device: DeviceLink, home: str
) -> tuple[str, dict[str, Any]]:
    """A light turned on with a transition and `?wait=converged`: (its id, the command API's answer)."""
    device_id = await register_device(api, home, "light")
    await device.report(device_id, {**BEFORE, "firmware_version": "1.0.0"})
    await twin_when(query, device_id, lambda t: t["reported"].get("brightness_pct") == 21)
    answer = asyncio.create_task(send(api, device_id, "turn_on", ASKED, wait="converged", timeout_s=30))
    command = await device.next_command(device_id)
    on_the_way = [
        report_request(
            device_id,
            next(device.seq),
            power="on",
            brightness_pct=21 + i * 15 // REPORTS_ON_THE_WAY,
            color_temp_k=3481 - i * 400 // REPORTS_ON_THE_WAY,
        )
        for i in range(REPORTS_ON_THE_WAY)
    ]
    arrived = report_request(device_id, next(device.seq), power="on", brightness_pct=40, color_temp_k=3000)
    await device.writer.send_requests(ack_request(device_id, command.command_id), *on_the_way, arrived)
    response = await answer
    assert response.status_code == 200, response.text
    told = response.json()
    assert told["status"] == "converged", told
    return device_id, told


def shows_what_was_asked(twin: dict[str, object]) -> bool:
    reported = twin["reported"]
    assert isinstance(reported, dict)
    return bool(reported["brightness_pct"] == 40 and reported["color_temp_k"] == 3000)


async def test_the_twin_read_with_command_id_after_converged_shows_the_converged_state(
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    bulb: DeviceLink,
    home: str,
) -> None:
    device_id, told = await converged_light(api, query, bulb, home)
    read = await query.get(f"/v1/devices/{device_id}", params={"command_id": told["command_id"], "wait_s": 5})
    assert read.status_code == 200, read.text
    twin = read.json()
    assert shows_what_was_asked(twin), twin["reported"]
    assert twin["version"] >= told["twin_version"], (twin["version"], told)


async def test_the_twin_read_with_min_version_after_converged_shows_the_converged_state(
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    bulb: DeviceLink,
    home: str,
) -> None:
    device_id, told = await converged_light(api, query, bulb, home)
    read = await query.get(
        f"/v1/devices/{device_id}", params={"min_version": told["twin_version"], "wait_s": 5}
    )
    assert read.status_code == 200, read.text
    assert shows_what_was_asked(read.json()), read.json()["reported"]
    events = await query.get(
        f"/v1/devices/{device_id}/events", params={"min_version": told["twin_version"], "limit": 1000}
    )
    converged = [
        e["version"]
        for e in events.json()["items"]
        if e["type"] == "command.converged" and e["correlation_id"] == told["command_id"]
    ]
    assert converged == [told["twin_version"]], (converged, told)  # the version its status was reached at
