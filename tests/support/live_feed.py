"""How tests drive the query API's websocket and extra query-API processes (shared by the subscription
and hostile-input tests)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import websockets

from hearth_devstack.launch.service_processes import Services, services_running
from hearth_devstack.supervision.ports import free_port
from tests.support.platform import Platform
from tests.support.registration import register_device

Message = dict[str, Any]


@contextmanager
def query_api_process(platform: Platform, logs: Path, env: dict[str, str]) -> Iterator[str]:
    """One more query API (one process) on the platform's PostgreSQL and Redis, with ``env`` settings."""
    port = free_port()
    services = Services(
        platform.settings,
        logs=logs,
        data=logs,
        query_api_port=port,
        extra_env={"HEARTH_READ_MODELS_API_WORKERS": "1", **env},
    )
    with services_running(services, ["query-api"]):
        yield f"http://127.0.0.1:{port}"


async def register(platform: Platform, home: str, device_type: str = "thermostat") -> str:
    async with platform.client(platform.command_api, home) as api:
        return await register_device(api, home, device_type)


def ws_url(base: str, token: str | None = None) -> str:
    return base.replace("http://", "ws://") + "/v1/subscribe" + (f"?token={token}" if token else "")


@asynccontextmanager
async def connected(
    platform: Platform, base: str, home: str | None, **connect: Any
) -> AsyncIterator[websockets.ClientConnection]:
    """A websocket with the home's token (admin without a home) in the Authorization header."""
    headers = {"Authorization": f"Bearer {platform.token(home)}"}
    async with websockets.connect(ws_url(base), additional_headers=headers, **connect) as ws:
        yield ws


@asynccontextmanager
async def subscription(
    platform: Platform, base: str, home: str | None, request: Message, **connect: Any
) -> AsyncIterator[websockets.ClientConnection]:
    """A websocket with the home's token in the Authorization header, subscribed with ``request``."""
    async with connected(platform, base, home, **connect) as ws:
        await ws.send(json.dumps({"action": "subscribe", **request}))
        yield ws


async def receive_until(
    ws: websockets.ClientConnection, done: Callable[[Message], bool], timeout_s: float = 30
) -> list[Message]:
    """Messages other than heartbeats, up to and including the first for which ``done`` is true."""
    received = []
    async with asyncio.timeout(timeout_s):
        while True:
            message = json.loads(await ws.recv())
            if message["type"] == "heartbeat":
                continue
            received.append(message)
            if done(message):
                return received


async def close_code(
    ws: websockets.ClientConnection, timeout_s: float = 30
) -> tuple[list[Message], int, str]:
    """Every message until the server closes the socket, and the close code and reason it sent (a
    TimeoutError if it stays open for ``timeout_s``)."""
    received: list[Message] = []
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                received.append(json.loads(await ws.recv()))
    except websockets.ConnectionClosed as closed:
        frame = closed.rcvd
    assert frame is not None, f"closed without a close frame after {received}"
    return received, frame.code, frame.reason


async def receive_for(ws: websockets.ClientConnection, seconds: float) -> list[Message]:
    """Every message the socket gets in ``seconds`` (it must stay open that long)."""
    received: list[Message] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while True:
                received.append(json.loads(await ws.recv()))
    return received
