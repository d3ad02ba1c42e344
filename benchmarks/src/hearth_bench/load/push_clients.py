"""The clients of ``hearth bench push`` (hearth_bench.benches.push): lean websocket subscribers of the query
API and, for the floor, lean Redis subscribers, spread over bench client processes (spawned, uvloop),
each taking ``time.monotonic()`` when the socket hands it a message's bytes, before parsing them.

A job of its own, apart from starting the stack, sending reports and computing the figures: holding
thousands of connections cheaply, and saying when each message came.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
import uuid
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from typing import Any, cast
from urllib.parse import urlparse

import msgspec
import psutil
import uvloop
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import enable_client_permessage_deflate
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

HOME = "bench-push"
CONNECTING = 50  # websockets opening at once, per client process
CHANGE = b'{"type":"change"'  # how a change message starts (as the projector encodes it)
SNAPSHOT = b'{"type":"snapshot"'  # and a snapshot (as the query API encodes it)


class _Fact(msgspec.Struct):
    type: str
    causation_id: uuid.UUID | None = None


class _Message(msgspec.Struct):
    type: str
    event: _Fact | None = None


_message = msgspec.json.Decoder(_Message)


# ------------------------------------------------------------------------- the client processes


class Client(asyncio.Protocol):
    """One websocket subscriber, as lean as a Python client gets: the ``websockets`` library's sans-I/O
    protocol (handshake, frames, permessage-deflate when accepted, pongs) on an asyncio protocol, no task
    and no message queue of its own. Each message's arrival is ``time.monotonic()`` taken when its bytes
    are handed over by the socket (``data_received``), before any parsing; kept raw, decoded at the end.
    """

    def __init__(self, url: str, devices: int, compression: bool) -> None:
        extensions = enable_client_permessage_deflate(None) if compression else None
        self.protocol = ClientProtocol(parse_uri(url), extensions=extensions)
        self.devices = devices
        self.snapshots = 0
        self.subscribed = asyncio.get_running_loop().create_future()  # done once its snapshots are in
        self.arrived: list[tuple[float, bytes]] = []  # after its snapshots: every text message
        self.changes = 0  # (heartbeats come too)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's are not asyncio.Transport)
        self.protocol.send_request(self.protocol.connect())
        self._flush()

    def data_received(self, data: bytes) -> None:
        at = time.monotonic()
        self.protocol.receive_data(data)
        for event in self.protocol.events_received():
            if isinstance(event, Response):
                if event.status_code != 101:
                    self._fail(RuntimeError(f"websocket handshake answered {event.status_code}"))
                    return
                self.protocol.send_text(msgspec.json.encode({"action": "subscribe", "home_id": HOME}))
            elif isinstance(event, Frame) and event.opcode is Opcode.TEXT:
                text = bytes(event.data)
                if self.subscribed.done():
                    self.arrived.append((at, text))
                    self.changes += text.startswith(CHANGE)
                elif text.startswith(SNAPSHOT):
                    self.snapshots += 1
                    if self.snapshots == self.devices:
                        self.subscribed.set_result(None)
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError(f"the websocket closed before its snapshots came: {exc}"))

    def _fail(self, exc: Exception) -> None:
        if not self.subscribed.done():
            self.subscribed.set_exception(exc)

    def _flush(self) -> None:
        if (out := self.protocol.data_to_send()) and self.transport is not None:
            self.transport.write(b"".join(out))

    async def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.protocol.send_close(1000)
            self._flush()
            self.transport.close()


async def _subscribe(url: str, devices: int, compression: bool) -> Client:
    where = parse_uri(url)
    loop = asyncio.get_running_loop()
    _, client = await loop.create_connection(
        lambda: Client(url, devices, compression), where.host, where.port
    )
    await asyncio.wait_for(client.subscribed, 60)
    return client


class Subscriber(asyncio.Protocol):
    """One Redis subscriber of the floor, as lean as the websocket clients: its own connection, RESP
    read by hand, and ``time.monotonic()`` when a message's bytes are handed over by the socket."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.buffer = bytearray()
        self.subscribed = asyncio.get_running_loop().create_future()
        self.arrived: list[tuple[float, int]] = []  # (when, the message's number)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's are not asyncio.Transport)
        channel = self.channel.encode()
        self.transport.write(b"*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n" % (len(channel), channel))

    def data_received(self, data: bytes) -> None:
        at = time.monotonic()
        self.buffer += data
        pos = 0
        while (parsed := _resp(self.buffer, pos)) is not None:
            reply, pos = parsed
            if reply[0] == b"message":
                self.arrived.append((at, int(reply[2][:8])))
            elif reply[0] == b"subscribe" and not self.subscribed.done():
                self.subscribed.set_result(None)
        del self.buffer[:pos]

    @property
    def changes(self) -> int:
        return len(self.arrived)

    async def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _resp(buffer: bytearray, pos: int) -> tuple[Any, int] | None:
    """One RESP2 reply (array, bulk string, integer or simple string) at ``pos``, and where it ends;
    None when the buffer does not hold all of it yet."""
    end = buffer.find(b"\r\n", pos)
    if end < 0:
        return None
    kind, line, pos = buffer[pos : pos + 1], bytes(buffer[pos + 1 : end]), end + 2
    if kind == b"*":
        items = []
        for _ in range(int(line)):
            if (parsed := _resp(buffer, pos)) is None:
                return None
            item, pos = parsed
            items.append(item)
        return items, pos
    if kind == b"$":
        size = int(line)
        if len(buffer) < pos + size + 2:
            return None
        return bytes(buffer[pos : pos + size]), pos + size + 2
    if kind == b"-":
        raise RuntimeError(f"Redis answered an error: {line.decode()}")
    return (int(line) if kind == b":" else line), pos


async def _redis_subscriber(redis_url: str, channel: str) -> Subscriber:
    where = urlparse(redis_url)
    loop = asyncio.get_running_loop()
    _, subscriber = await loop.create_connection(
        lambda: Subscriber(channel), where.hostname or "127.0.0.1", where.port or 6379
    )
    await asyncio.wait_for(subscriber.subscribed, 60)
    return subscriber


def _client_process(conn: Connection, job: dict[str, Any]) -> None:
    """A bench client process: opens its share of the clients, says so, waits to be told how many
    messages to expect, and sends back when each client read each one (or an error)."""
    try:
        uvloop.run(_client_main(conn, job))
    except BaseException as exc:
        conn.send(("error", repr(exc)))
        raise


async def _client_main(conn: Connection, job: dict[str, Any]) -> None:
    clients: list[Any]
    began = time.monotonic()
    if job["mode"] == "websocket":
        urls, devices, compression = job["urls"], job["devices"], job["compression"]
        clients = await _gated(
            job["count"], CONNECTING, lambda i: _subscribe(urls[i % len(urls)], devices, compression)
        )
    else:
        redis_url, channel = job["redis_url"], job["channel"]
        clients = await _gated(job["count"], CONNECTING, lambda i: _redis_subscriber(redis_url, channel))
    conn.send(("ready", time.monotonic() - began))
    expected, timeout_s = await asyncio.to_thread(conn.recv)
    await _wait_for(lambda: all(c.changes >= expected for c in clients), timeout_s)
    await asyncio.gather(*(client.close() for client in clients))
    if job["mode"] == "websocket":
        conn.send(("arrived", _changes_read(clients)))
    else:
        conn.send(("arrived", [arrival for client in clients for arrival in client.arrived]))


def _changes_read(clients: list[Client]) -> tuple[list[list[tuple[float, uuid.UUID]]], bytes | None]:
    """Per client: (when it was read, the report's request id) of each ``device.state_reported`` change;
    and one such change message."""
    read, sample = [], None
    for client in clients:
        mine = []
        for at, text in client.arrived:
            message = _message.decode(text)
            fact = message.event
            if (
                message.type == "change"
                and fact
                and fact.type == "device.state_reported"
                and fact.causation_id
            ):
                mine.append((at, fact.causation_id))
                sample = text
        read.append(mine)
    return read, sample


class ClientProcesses:
    """``processes`` bench client processes sharing ``count`` clients (websockets or Redis subscribers)."""

    def __init__(self, processes: int, count: int, **job: Any) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.procs = []
        for k in range(processes):
            share = count // processes + (k < count % processes)
            mine, theirs = context.Pipe()
            proc = context.Process(
                target=_client_process, args=(theirs, {**job, "count": share}), daemon=True
            )
            self.pipes.append(mine)
            self.procs.append(proc)

    async def start(self) -> float:
        """Start them; once every client is connected and subscribed, the slowest process's time for it."""
        for proc in self.procs:
            proc.start()
        return float(max(await asyncio.gather(*(self._receive(pipe, "ready") for pipe in self.pipes))))

    async def results(self, expected: int, timeout_s: float) -> list[Any]:
        """Tell them to wait until each client has read ``expected`` messages (or ``timeout_s`` passed),
        close, and send what each read; their answers, one per process."""
        for pipe in self.pipes:
            pipe.send((expected, timeout_s))
        return list(await asyncio.gather(*(self._receive(pipe, "arrived") for pipe in self.pipes)))

    def cpu_seconds(self) -> float:
        return sum(sum(psutil.Process(proc.pid).cpu_times()[:2]) for proc in self.procs if proc.pid)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.pid is None:
                continue  # never started
            proc.join(10)
            if proc.is_alive():
                proc.kill()

    @staticmethod
    async def _receive(pipe: Connection, kind: str) -> Any:
        what, value = await asyncio.to_thread(pipe.recv)
        if what != kind:
            raise RuntimeError(f"a bench client process failed: {value}")
        return value


async def _wait_for(done: Callable[[], bool], timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        if done() or loop.time() >= deadline:
            return
        await asyncio.sleep(0.1)


async def _gated(n: int, limit: int, open_one: Callable[[int], Awaitable[Any]]) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(i: int) -> Any:
        async with gate:
            return await open_one(i)

    return list(await asyncio.gather(*(one(i) for i in range(n))))
