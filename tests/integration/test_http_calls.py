"""``GatedClient`` keeps its pool through an outage that costs a plain httpx client every connection
(hearth_shared.adapters.http_calls says why; encode/httpcore#1093).

The outage is the one the scale-out drill met, made small: a steady stream of calls, each sent again
until it is answered (as the drill's command ledger does), to a local HTTP server that is first down,
then slower than the calls' timeout, then well again. With httpx's default limits (scaled down to 20
connections), the plain client's pool keeps connections stuck ``CONNECTING`` after every call ended
(in runs on this machine: all 20 of them, and every later call failed with ``PoolTimeout`` against the
healthy server). The gated client, through the same outage, keeps none, and its later calls are answered.

The plain client's check fails if httpcore no longer loses slots here: then the gate may go.
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass

import httpx
import pytest

from hearth_shared.adapters.http_calls import GatedClient

pytestmark = pytest.mark.integration

TIMEOUT_S = 0.5  # every timeout of the outage's calls, the pool's wait among them
CONNECTIONS = 20
CALLS_PER_S = 4 * CONNECTIONS / TIMEOUT_S  # four times what the pool holds, per timeout
CALLS_AFTER = 3


@dataclass
class Outcome:
    stuck: int  # connections left CONNECTING in the pool once every call of the outage ended
    after: collections.Counter[str]  # what the calls made after it got (status or error)


async def through_an_outage(client: httpx.AsyncClient) -> Outcome:
    delay = {"s": 0.0}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                await asyncio.sleep(delay["s"])
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass  # the client gave up on this connection
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    calls: list[asyncio.Task[None]] = []

    async def call_until_answered(give_up_at: float) -> None:
        while time.monotonic() < give_up_at:
            try:
                await client.get(url)
                return
            except httpx.TransportError:
                await asyncio.sleep(TIMEOUT_S / 20)

    async def steady(seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            give_up_at = time.monotonic() + 6 * TIMEOUT_S
            calls.append(asyncio.create_task(call_until_answered(give_up_at)))
            await asyncio.sleep(1 / CALLS_PER_S)

    async with client:
        server.close()
        await server.wait_closed()
        await steady(0.6 * TIMEOUT_S)  # down: every connection refused
        delay["s"] = 1.2 * TIMEOUT_S
        server = await asyncio.start_server(serve, "127.0.0.1", port)
        await steady(4 * TIMEOUT_S)  # up, and slower than the calls' timeout
        delay["s"] = 0.0
        await asyncio.gather(*calls)
        stuck = sum("CONNECTING" in repr(c) for c in client._transport._pool.connections)  # type: ignore[attr-defined]
        after: collections.Counter[str] = collections.Counter()
        if stuck == 0:  # (with slots lost, each call would only wait out its timeout)
            for _ in range(CALLS_AFTER):
                try:  # a timeout a loaded machine meets too: the server is well again
                    after[str((await client.get(url, timeout=30)).status_code)] += 1
                except httpx.TransportError as error:
                    after[type(error).__name__] += 1
    server.close()
    await server.wait_closed()
    return Outcome(stuck, after)


async def test_the_gated_client_keeps_its_pool_through_an_outage_that_a_plain_one_loses() -> None:
    httpx_default_limits = httpx.Limits(
        max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS // 5
    )
    plain = await through_an_outage(httpx.AsyncClient(timeout=TIMEOUT_S, limits=httpx_default_limits))
    assert plain.stuck > 0, "a plain httpx client no longer loses pool slots here: is httpcore#1093 fixed?"

    gated = await through_an_outage(GatedClient(timeout=TIMEOUT_S, max_connections=CONNECTIONS))
    assert gated.stuck == 0
    assert gated.after == {"200": CALLS_AFTER}


async def test_the_gated_client_refuses_a_streamed_response() -> None:
    async with GatedClient() as client:
        with pytest.raises(ValueError, match="streamed"):
            await client.send(client.build_request("GET", "http://127.0.0.1:9/"), stream=True)
    with pytest.raises(TypeError, match="max_connections"):
        GatedClient(limits=httpx.Limits(max_connections=5))
