"""Hostile and broken websocket clients at ``WS /v1/subscribe``, on the real services: each gets the close
code the contract gives it (4400 bad request, 4408 too slow), never silence and never a crash, and the
server keeps serving everyone else.

A query API process of its own (``strict``) runs with a small message limit and fast pings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator

import pytest
import websockets

from tests.support.device_link import DeviceLink
from tests.support.live_feed import (
    close_code,
    connected,
    query_api_process,
    receive_until,
    register,
    subscription,
)
from tests.support.platform import Platform
from tests.support.waiting import twin_when

pytestmark = pytest.mark.integration

MESSAGE_LIMIT = 4096  # the strict process's subscribe_max_message_bytes (its transport's limit: 4x)
PING_INTERVAL_S, PING_TIMEOUT_S = 0.5, 1.0


@pytest.fixture(scope="module")
def strict(platform: Platform, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {
        "HEARTH_READ_MODELS_SUBSCRIBE_MAX_MESSAGE_BYTES": str(MESSAGE_LIMIT),
        "HEARTH_READ_MODELS_WS_PING_INTERVAL_S": str(PING_INTERVAL_S),
        "HEARTH_READ_MODELS_WS_PING_TIMEOUT_S": str(PING_TIMEOUT_S),
        "HEARTH_READ_MODELS_SUBSCRIBE_HEARTBEAT_S": "0.1",
    }
    with query_api_process(platform, tmp_path_factory.mktemp("strict-query-api"), env) as url:
        yield url


@pytest.fixture
async def device(platform: Platform) -> AsyncIterator[DeviceLink]:
    async with DeviceLink(platform.settings) as link:
        yield link


async def read_on(ws: websockets.ClientConnection, into: list[str]) -> None:
    """A client that keeps reading (and so answers pings), until its socket closes."""
    with contextlib.suppress(websockets.ConnectionClosed):
        while True:
            into.append(str(await ws.recv()))


def subscribe(**fields: object) -> str:
    return json.dumps({"action": "subscribe", **fields})


GARBAGE = {
    "binary": b"\x00\xff\x00",
    "not JSON": "hello",
    "not an object": "[1, 2]",
    "no action": json.dumps({"home_id": "h"}),
    "NUL in home_id": subscribe(home_id="h\u0000"),
    "newline after home_id": subscribe(home_id="h\n"),
    "control character in a device id": subscribe(device_ids=["d\u001b"]),
    "NUL in an after key": subscribe(home_id="h", after={"d\u0000": 1}),
    "empty device id": subscribe(device_ids=[""]),
    "negative after": subscribe(home_id="h", after={"d": -1}),
    "after beyond 64 bits": subscribe(home_id="h", after={"d": 2**70}),
    "too many device ids": subscribe(device_ids=[f"d{i}" for i in range(1001)]),
}


@pytest.mark.parametrize("first", GARBAGE.values(), ids=GARBAGE.keys())
async def test_a_garbage_first_message_gets_an_error_and_4400(
    platform: Platform, home: str, first: str | bytes
) -> None:
    async with connected(platform, platform.query_api, home) as ws:
        await ws.send(first)
        received, code, _ = await close_code(ws)
    assert code == 4400
    assert [m["reason"] for m in received] == ["bad_request"], received


async def test_a_first_message_over_the_limit_gets_4400_and_one_over_the_transport_limit_1009(
    platform: Platform, strict: str, home: str
) -> None:
    too_large = subscribe(home_id=home, pad="x" * MESSAGE_LIMIT)
    async with connected(platform, strict, home) as ws:
        await ws.send(too_large)
        received, code, _ = await close_code(ws)
    assert code == 4400 and "too large" in received[0]["message"], received
    async with connected(platform, strict, home) as ws:
        await ws.send(subscribe(home_id=home, pad="x" * (4 * MESSAGE_LIMIT)))
        _, code, _ = await close_code(ws)
    assert code == 1009  # message too big, refused by the transport before it was buffered


async def test_a_message_over_the_limit_after_subscribing_gets_4400(
    platform: Platform, strict: str, home: str
) -> None:
    device_id = await register(platform, home)
    async with platform.client(platform.query_api, home) as reader:
        await twin_when(reader, device_id, lambda twin: True)
    async with subscription(platform, strict, home, {"home_id": home}) as ws:
        await receive_until(ws, lambda m: m["type"] == "snapshot")
        await ws.send("y" * (MESSAGE_LIMIT + 1))
        _, code, reason = await close_code(ws)
    assert code == 4400 and "too large" in reason


async def test_after_beyond_a_devices_version_gets_an_error_and_the_snapshot_then_changes(
    platform: Platform, device: DeviceLink, home: str
) -> None:
    device_id = await register(platform, home)
    async with platform.client(platform.query_api, home) as reader:
        twin = await twin_when(reader, device_id, lambda twin: True)
    request = {"home_id": home, "after": {device_id: twin["version"] + 100}}
    async with subscription(platform, platform.query_api, home, request) as ws:
        first = await receive_until(ws, lambda m: m["type"] == "snapshot", timeout_s=10)
        await device.report(device_id, {"ambient_c": 21.5})
        changes = await receive_until(
            ws, lambda m: m["type"] == "change" and m["twin"]["reported"].get("ambient_c") == 21.5
        )
    assert [m["type"] for m in first] == ["error", "snapshot"]
    assert first[0]["reason"] == "after_beyond_version" and device_id in first[0]["message"]
    assert first[1]["version"] >= twin["version"]
    assert changes[0]["version"] == first[1]["version"] + 1


async def test_a_client_that_stops_reading_is_closed_4408(platform: Platform, strict: str, home: str) -> None:
    """It used to be closed 1011 by the keepalive: the code for a lost live feed, not for a slow client.
    The client's library stops reading once it holds one message, so it answers no ping."""
    async with (
        subscription(platform, strict, home, {"home_id": home}, max_queue=1, ping_interval=None) as slow,
        subscription(platform, strict, home, {"home_id": home}) as reading,
    ):
        read: list[str] = []
        reader = asyncio.create_task(read_on(reading, read))
        await asyncio.sleep(PING_INTERVAL_S + PING_TIMEOUT_S + 3)  # (margin for two busy cores)
        received, code, reason = await close_code(slow)
        assert not reader.done(), "the reading client was closed too"
        reader.cancel()
    assert code == 4408 and "too slow" in reason, (code, reason)
    assert received and all(m["type"] == "heartbeat" for m in received)  # what it had, then the close
    assert len(read) > 10  # the reading client was served on


async def test_many_clients_that_never_read_are_all_closed_4408(
    platform: Platform, strict: str, home: str
) -> None:
    async with subscription(platform, strict, home, {"home_id": home}) as reading:
        reader = asyncio.create_task(read_on(reading, []))
        clients = [
            websockets.connect(
                strict.replace("http://", "ws://") + "/v1/subscribe",
                additional_headers={"Authorization": f"Bearer {platform.token(home)}"},
                max_queue=1,
                ping_interval=None,
            )
            for _ in range(50)
        ]
        opened = [await client.__aenter__() for client in clients]
        try:
            for ws in opened:
                await ws.send(subscribe(home_id=home))
            await asyncio.sleep(PING_INTERVAL_S + PING_TIMEOUT_S + 5)
            codes = [(await close_code(ws))[1] for ws in opened]
            assert not reader.done(), "the reading client was closed too"
        finally:
            reader.cancel()
            for client in clients:
                await client.__aexit__(None, None, None)
    assert codes == [4408] * len(codes)
