"""WS /v1/subscribe through the real services: snapshots, live changes, resuming with ``after``,
heartbeats, auth, no leak across homes, slow clients; the test plays the devices over the broker.

Most tests use the platform's query API. A second query API process runs beside it (``tuned``), with a
short heartbeat, a small per-client queue and a generous history catch-up, for the tests that need them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
import websockets
from redis.asyncio import Redis

from tests.support.device_link import DeviceLink
from tests.support.live_feed import (
    Message,
    close_code,
    query_api_process,
    receive_for,
    receive_until,
    register,
    subscription,
    ws_url,
)
from tests.support.platform import Platform
from tests.support.waiting import twin_when

pytestmark = pytest.mark.integration

THERMOSTAT = {
    "ambient_c": 19.0,
    "humidity_pct": 40.0,
    "hvac_mode": "heat",
    "hvac_action": "idle",
    "target_c": 19,
}
TUNED_QUEUE = 20


@pytest.fixture(scope="module")
def tuned(platform: Platform, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second query API, one process, on the same PostgreSQL and Redis: 0.5 s heartbeats, a queue of 20."""
    env = {
        "HEARTH_READ_MODELS_SUBSCRIBE_HEARTBEAT_S": "0.5",
        "HEARTH_READ_MODELS_SUBSCRIBE_QUEUE_SIZE": str(TUNED_QUEUE),
        "HEARTH_READ_MODELS_SUBSCRIBE_CATCHUP_S": "20",
    }
    with query_api_process(platform, tmp_path_factory.mktemp("tuned-query-api"), env) as url:
        yield url


@pytest.fixture
async def device(platform: Platform) -> AsyncIterator[DeviceLink]:
    async with DeviceLink(platform.settings) as link:
        yield link


async def history(platform: Platform, home: str, device_id: str, after: int) -> list[Message]:
    async with platform.client(platform.query_api, home) as query:
        response = await query.get(f"/v1/devices/{device_id}/events", params={"after_version": after})
    return list(response.json()["items"])


async def online_thermostat(platform: Platform, device: DeviceLink, home: str) -> tuple[str, Message]:
    """A registered thermostat that has reported once, and its twin once the views show that report."""
    device_id = await register(platform, home)
    await device.report(device_id, THERMOSTAT)
    async with platform.client(platform.query_api, home) as reader:
        twin = await twin_when(reader, device_id, lambda t: t["reported"].get("humidity_pct") == 40.0)
    return device_id, twin


def reported(device_id: str, key: str, value: Any) -> Callable[[Message], bool]:
    return lambda m: m.get("device_id") == device_id and m["twin"]["reported"].get(key) == value


def versions(messages: list[Message], device_id: str) -> list[int]:
    return [m["version"] for m in messages if m.get("device_id") == device_id]


def assert_consistent(messages: list[Message]) -> None:
    """Every change names its own version in its twin and its fact."""
    for m in messages:
        if m["type"] == "change":
            assert m["twin"]["version"] == m["event"]["version"] == m["version"], m


async def test_snapshot_then_live_changes_and_devices_registered_later(
    platform: Platform, device: DeviceLink, home: str
) -> None:
    device_id, twin = await online_thermostat(platform, device, home)
    async with subscription(platform, platform.query_api, home, {"home_id": home}) as ws:
        snapshot = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert snapshot["type"] == "snapshot"
        assert (snapshot["device_id"], snapshot["twin"]["device_id"]) == (device_id, device_id)
        assert snapshot["version"] == snapshot["twin"]["version"] >= twin["version"]

        await device.report(device_id, {"ambient_c": 20.5})
        changes = await receive_until(ws, reported(device_id, "ambient_c", 20.5))
        assert {m["type"] for m in changes} == {"change"}
        assert versions(changes, device_id) == list(
            range(snapshot["version"] + 1, snapshot["version"] + 1 + len(changes))
        )
        assert changes[-1]["event"]["type"] == "device.state_reported"
        assert_consistent(changes)

        later = await register(platform, home, "lock")
        registered = await receive_until(ws, lambda m: m.get("device_id") == later)
        assert (registered[-1]["type"], registered[-1]["version"]) == ("change", 1)
        assert registered[-1]["event"]["type"] == "device.registered"
        assert registered[-1]["twin"]["type"] == "lock"


async def test_resume_with_after_gives_exactly_the_missed_changes(
    platform: Platform, device: DeviceLink, home: str
) -> None:
    device_id, _ = await online_thermostat(platform, device, home)
    async with subscription(platform, platform.query_api, home, {"home_id": home}) as ws:
        seen = json.loads(await asyncio.wait_for(ws.recv(), 30))["version"]

    for i in range(5):  # missed while disconnected
        await device.report(device_id, {"ambient_c": 20.0 + i})
    async with platform.client(platform.query_api, home) as reader:
        await twin_when(reader, device_id, lambda t: t["reported"]["ambient_c"] == 24.0)

    async def keep_reporting() -> None:  # and more while resuming
        for i in range(5):
            await device.report(device_id, {"ambient_c": 25.0 + i})
            await asyncio.sleep(0.05)

    reporting = asyncio.create_task(keep_reporting())
    request = {"home_id": home, "after": {device_id: seen}}
    async with subscription(platform, platform.query_api, home, request) as ws:
        await reporting
        received = await receive_until(ws, reported(device_id, "ambient_c", 29.0))
        received += await receive_for(ws, 1.0)  # anything after it, e.g. the device going offline
    received = [m for m in received if m["type"] != "heartbeat"]

    assert {m["type"] for m in received} == {"change"}
    journal = await history(platform, home, device_id, seen)
    got = versions(received, device_id)
    assert got == list(range(seen + 1, seen + 1 + len(got))), "a gap or a duplicate"
    assert [m["event"]["event_id"] for m in received] == [e["event_id"] for e in journal][: len(received)]
    assert_consistent(received)
    async with platform.client(platform.query_api, home) as reader:
        current = await twin_when(reader, device_id, lambda t: t["version"] >= got[-1])
    if current["version"] == got[-1]:
        assert received[-1]["twin"] == current


async def test_a_change_seen_live_before_its_history_is_committed_waits_for_it(
    platform: Platform, tuned: str, device: DeviceLink, home: str
) -> None:
    """The projector publishes just before it commits: a change more than one version ahead of what the
    client has makes the server read the history again until it holds the versions in between."""
    device_id, twin = await online_thermostat(platform, device, home)
    v = twin["version"]
    ahead = {"type": "change", "device_id": device_id, "version": v + 2, "twin": {}, "event": {"ahead": True}}
    async with subscription(platform, tuned, home, {"home_id": home, "after": {device_id: v - 1}}) as ws:
        first = await receive_until(ws, lambda m: m.get("version") == v)
        async with Redis.from_url(platform.settings.redis_url) as redis:
            await redis.publish(f"home:{home}", json.dumps(ahead))  # v+1 is not even reported yet
        await device.report(device_id, {"ambient_c": 23.5})
        rest = await receive_until(ws, lambda m: m.get("version") == v + 2, timeout_s=40)
    assert versions(first + rest, device_id) == [v, v + 1, v + 2]
    assert rest[0]["event"]["event_id"] == (await history(platform, home, device_id, v))[0]["event_id"]
    assert rest[-1]["event"] == {"ahead": True}


async def test_heartbeats(platform: Platform, tuned: str, home: str) -> None:
    async with subscription(platform, tuned, home, {"home_id": home}) as ws:
        beats = [json.loads(await asyncio.wait_for(ws.recv(), 5)) for _ in range(3)]
    assert [b["type"] for b in beats] == ["heartbeat"] * 3
    assert all(datetime.fromisoformat(b["at"]).tzinfo for b in beats)


async def test_permessage_deflate_offered_by_the_client_is_declined(platform: Platform, home: str) -> None:
    """Each websocket would compress every change again for itself alone: the fan-out sends it as is."""
    request = {"home_id": home}
    async with subscription(platform, platform.query_api, home, request, compression="deflate") as ws:
        offered = ws.request.headers["Sec-WebSocket-Extensions"] if ws.request else ""
        accepted = ws.response.headers.get("Sec-WebSocket-Extensions") if ws.response else "no response"
    assert "permessage-deflate" in offered
    assert accepted is None and ws.protocol.extensions == []


@pytest.mark.parametrize("token", [None, "hth_bogus.token.x"])
async def test_no_or_bad_token_is_closed_with_4401(platform: Platform, token: str | None) -> None:
    async with websockets.connect(ws_url(platform.query_api, token)) as ws:
        error = json.loads(await asyncio.wait_for(ws.recv(), 10))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
    assert (error["type"], error["reason"]) == ("error", "unauthorized")
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


async def test_another_homes_devices_are_never_sent(
    platform: Platform, device: DeviceLink, home: str
) -> None:
    other_home = f"home-{uuid.uuid4().hex[:8]}"
    theirs, _ = await online_thermostat(platform, device, other_home)
    mine, _ = await online_thermostat(platform, device, home)

    async with subscription(platform, platform.query_api, home, {"home_id": other_home}) as ws:
        error = json.loads(await asyncio.wait_for(ws.recv(), 10))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
    assert (error["reason"], closed.value.rcvd and closed.value.rcvd.code) == ("forbidden", 4403)

    async with (
        subscription(platform, platform.query_api, home, {"device_ids": [theirs, mine]}) as by_device,
        subscription(platform, platform.query_api, home, {"home_id": home}) as by_home,
    ):
        await device.report(theirs, {"ambient_c": 30.0})
        await device.report(mine, {"ambient_c": 21.0})
        received = await receive_until(by_device, reported(mine, "ambient_c", 21.0))
        received += await receive_until(by_home, reported(mine, "ambient_c", 21.0))
        received += await receive_for(by_device, 1.0) + await receive_for(by_home, 0.2)
    assert {"type": "error", "reason": "not_found", "message": f"device {theirs} not found"} in received
    assert theirs not in json.dumps([m for m in received if m["type"] != "error"])
    assert other_home not in json.dumps(received)


async def test_a_slow_client_is_disconnected_while_others_keep_receiving(
    platform: Platform, tuned: str, device: DeviceLink, home: str
) -> None:
    device_id, _ = await online_thermostat(platform, device, home)
    noise = f"noise-{uuid.uuid4().hex[:6]}"
    count = 400

    def filler(version: int) -> str:  # a change as the projector would publish it, but big
        twin = {
            "device_id": noise,
            "home_id": home,
            "version": version,
            "blob": secrets.token_urlsafe(48_000),
        }
        message = {"type": "change", "device_id": noise, "version": version, "twin": twin, "event": {}}
        return json.dumps(message)

    request = {"home_id": home}
    async with (
        subscription(platform, tuned, home, request, compression=None, max_queue=1) as slow,
        subscription(platform, tuned, home, request) as normal,
    ):
        await receive_until(normal, lambda m: m["type"] == "snapshot")
        reading = asyncio.create_task(receive_until(normal, lambda m: m.get("version") == count, 60))
        async with Redis.from_url(platform.settings.redis_url) as redis:
            for version in range(1, count + 1):
                await redis.publish(f"home:{home}", filler(version))
                if version % 10 == 0:
                    await asyncio.sleep(0.1)  # as fast as a reading client keeps up with
        assert versions(await reading, noise) == list(range(1, count + 1))

        await device.report(device_id, {"ambient_c": 22.5})
        await receive_until(normal, reported(device_id, "ambient_c", 22.5))

        slow_got, code, reason = await close_code(slow, 30)
    assert code == 4408 and "too slow" in reason
    assert len(versions(slow_got, noise)) < count


async def test_query_api_processes_side_by_side_deliver_the_same_changes(
    platform: Platform, tuned: str, device: DeviceLink, home: str
) -> None:
    device_id, _ = await online_thermostat(platform, device, home)
    async with (
        subscription(platform, platform.query_api, home, {"home_id": home}) as one,
        subscription(platform, tuned, home, {"home_id": home}) as other,
    ):
        for ws in (one, other):
            await receive_until(ws, lambda m: m["type"] == "snapshot")
        await device.report(device_id, {"ambient_c": 18.5})
        done = reported(device_id, "ambient_c", 18.5)
        first, second = await receive_until(one, done), await receive_until(other, done)
    assert first[-1] == second[-1]


async def test_the_websockets_of_a_home_share_one_redis_subscription_per_process(
    platform: Platform, tuned: str, device: DeviceLink, home: str
) -> None:
    device_id, _ = await online_thermostat(platform, device, home)
    async with contextlib.AsyncExitStack() as stack, Redis.from_url(platform.settings.redis_url) as redis:
        clients = [
            await stack.enter_async_context(subscription(platform, tuned, home, {"home_id": home}))
            for _ in range(50)
        ]
        await asyncio.gather(*(receive_until(ws, lambda m: m["type"] == "snapshot") for ws in clients))
        assert await redis.pubsub_numsub(f"home:{home}") == [(f"home:{home}".encode(), 1)]

        await device.report(device_id, {"ambient_c": 17.5})
        done = reported(device_id, "ambient_c", 17.5)
        got = await asyncio.gather(*(receive_until(ws, done) for ws in clients))
    assert len({json.dumps(messages[-1]) for messages in got}) == 1


async def test_bad_subscribe_messages_get_an_error_and_4400(platform: Platform, home: str) -> None:
    for bad in ({"action": "watch"}, {"action": "subscribe", "home_id": home, "device_ids": ["x"]}):
        headers = {"Authorization": f"Bearer {platform.token(home)}"}
        async with websockets.connect(ws_url(platform.query_api), additional_headers=headers) as ws:
            await ws.send(json.dumps(bad))
            error = json.loads(await asyncio.wait_for(ws.recv(), 10))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
        assert error["reason"] == "bad_request"
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4400


async def test_the_live_page_is_served(platform: Platform) -> None:
    async with httpx.AsyncClient(base_url=platform.query_api) as client:
        page, script = await client.get("/"), await client.get("/static/app.js")
        missing = await client.get("/static/nope.js")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert script.status_code == 200 and "/v1/subscribe" in script.text
    assert missing.status_code == 404
