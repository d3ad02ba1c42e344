"""The MQTT side of ``hearth bench gateway``, as separate processes (so the devices' and the counter's CPU
is neither the bench's nor each other's, and each is measured on its own): ``python -m
hearth_bench.load.mqtt_load publish|count|hold`` reads a JSON job on its first line of standard input, says
``ready`` on standard output, and starts on a ``go`` line.

* ``publish``: ``connections`` connections publish ``reports`` state reports
  (``gateway_figures.report_payloads``) at QoS 1 on ``<root>/<device id>/state``; each device's reports
  go through one connection, in seq order. The packets are built before ``ready`` (``mqtt_wire``), and
  each connection keeps the broker's receive maximum of them unacknowledged, writing as many more as a
  read of PUBACKs acknowledged: a few microseconds of CPU per message, so the publishers are not what
  limits the rate (the bench shows each one's CPU share). It answers one JSON line: when the first
  publish was written and when the broker had acknowledged the last (wall clock).
* ``count``: the floor's subscriber. One connection subscribed at QoS 1 to ``filter`` with the gateway's
  receive maximum; it counts PUBLISHes as they arrive and writes the PUBACKs of each read in one write,
  doing nothing else (no library: ``mqtt_wire``). It answers one JSON line when ``expected`` came (or
  nothing more for ``stall_s``): the count, and the first and last arrival.
* ``hold``: one connection per device, each with its own credentials (username = device id), subscribed
  to its own ``commands`` topic with its will on ``availability``, as a device of the SDK does (spoken
  by hand, ``_HeldDevice``: a few KiB per connection in the holder); it says ``connected N`` as they
  come up and ``held N`` when every one is up (or gave up), then holds them until ``stop``. One holder
  holds at most its open-files limit of connections: ``hold_connections`` starts one per broker.
"""

from __future__ import annotations

import asyncio
import json
import resource
import shutil
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any, cast

import psutil

from hearth_bench.figures.gateway_figures import Arrivals, report_payloads, top_frames
from hearth_bench.load import mqtt_wire
from hearth_shared.schema.mqtt import availability_topic, commands_topic

READ_BYTES = 1 << 20
MAX_PACKET_ID = 65535
ATTEMPTS = 3  # connection attempts per held device


def raise_open_files_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def _open(
    job: dict[str, Any], client_id: str, receive_maximum: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int]:
    """A connection, CONNACKed: its streams and the broker's receive maximum."""
    reader, writer = await asyncio.open_connection(job["host"], int(job["port"]))
    writer.write(
        mqtt_wire.connect(client_id, job["username"], job["password"], receive_maximum=receive_maximum)
    )
    body = await _next_packet(reader, mqtt_wire.CONNACK)
    reason, window = mqtt_wire.connack(body)
    if reason:
        raise ConnectionError(f"{client_id}: CONNACK reason 0x{reason:02x}")
    return reader, writer, window


async def _next_packet(reader: asyncio.StreamReader, kind: int) -> bytes:
    """The body of the next packet, which must be of ``kind`` (during set-up, nothing else comes)."""
    first = (await reader.readexactly(1))[0]
    length, shift = 0, 0
    while True:
        byte = (await reader.readexactly(1))[0]
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    body = await reader.readexactly(length)
    if first & 0xF0 != kind & 0xF0:
        raise ConnectionError(f"expected packet 0x{kind:02x}, got 0x{first:02x}")
    return body


async def _publish(job: dict[str, Any]) -> dict[str, Any]:
    ids: list[str] = job["device_ids"]
    count = int(job["connections"])
    work: list[list[bytes]] = [[] for _ in range(count)]
    for device, payload in report_payloads(len(ids), int(job["reports"]), at=job["at"]):
        packets = work[device % count]
        packet_id = len(packets) % MAX_PACKET_ID + 1  # in flight at most the receive maximum: no clash
        packets.append(mqtt_wire.publish(f"{job['root']}/{ids[device]}/state", payload, packet_id))
    links = [await _open(job, f"bench-publisher-{job['name']}-{c}", MAX_PACKET_ID) for c in range(count)]
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # "go"
    started = time.time()
    await asyncio.gather(*(_send(link, packets) for link, packets in zip(links, work, strict=True)))
    done = time.time()
    for _, writer, _ in links:
        writer.close()
    return {"started": started, "acknowledged": done, "published": sum(map(len, work))}


async def _send(link: tuple[asyncio.StreamReader, asyncio.StreamWriter, int], packets: list[bytes]) -> None:
    """Write ``packets`` keeping at most the broker's receive maximum unacknowledged."""
    reader, writer, window = link
    sent = min(window, len(packets))
    writer.write(b"".join(packets[:sent]))
    acknowledged, buffer = 0, b""
    while acknowledged < len(packets):
        data = await reader.read(READ_BYTES)
        if not data:
            raise ConnectionError(f"the broker closed the connection after {acknowledged} PUBACKs")
        buffer += data
        got, used = 0, 0
        for first, start, end in mqtt_wire.split(buffer):
            if first & 0xF0 == mqtt_wire.PUBACK:
                if end - start > 2 and buffer[start + 2] >= 0x80:
                    raise ConnectionError(f"PUBLISH refused: reason 0x{buffer[start + 2]:02x}")
                got += 1
            used = end
        buffer = buffer[used:]
        acknowledged += got
        if got and sent < len(packets):
            more = min(len(packets), sent + got)
            writer.write(b"".join(packets[sent:more]))
            sent = more


async def _count(job: dict[str, Any]) -> dict[str, Any]:
    reader, writer, _ = await _open(job, "bench-floor-counter", int(job["receive_maximum"]))
    writer.write(mqtt_wire.subscribe(1, job["filter"]))
    granted = await _next_packet(reader, mqtt_wire.SUBACK)
    if granted[-1] >= 0x80:
        raise ConnectionError(f"subscription to {job['filter']} refused: 0x{granted[-1]:02x}")
    print("ready", flush=True)
    expected, stall_s = int(job["expected"]), float(job["stall_s"])
    arrivals = Arrivals()
    buffer = bytearray()
    with suppress(TimeoutError):
        while arrivals.count < expected:
            data = await asyncio.wait_for(reader.read(READ_BYTES), stall_s)
            if not data:
                break
            now = time.time()
            buffer += data
            packet_ids, used = [], 0
            for first, start, end in mqtt_wire.split(buffer):
                if first & 0xF6 == mqtt_wire.PUBLISH | 0x02:  # QoS 1
                    packet_ids.append(mqtt_wire.publish_packet_id(buffer, start))
                used = end
            del buffer[:used]
            if packet_ids:
                writer.write(mqtt_wire.pubacks(packet_ids))
                arrivals.add(len(packet_ids), now)
    await writer.drain()
    writer.close()
    return {
        "received": arrivals.count,
        "first": arrivals.first,
        "last": arrivals.last,
        "first_batch": arrivals.first_batch,
    }


class _HeldDevice(asyncio.Protocol):
    """One held device's connection, MQTT spoken by hand (``mqtt_wire``): CONNECT with its credentials and
    its will on ``availability``; once CONNACKed, SUBSCRIBE to its ``commands`` and ``online`` retained
    (as a device of the SDK does); a command that comes is acknowledged. No library, so that holding
    100,000 of them costs the holder little memory and CPU, and the broker's is what is measured."""

    def __init__(self, device_id: str, password: str) -> None:
        self.device_id, self.password = device_id, password
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.connacked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.open = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport, self.open = cast(asyncio.Transport, transport), True  # uvloop's is no subclass
        will = (availability_topic(self.device_id), b"offline")
        self.transport.write(
            mqtt_wire.connect(self.device_id, self.device_id, self.password, receive_maximum=16, will=will)
        )

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        consumed = 0
        for first, start, end in mqtt_wire.split(self.buffer):
            consumed = end
            kind = first & 0xF0
            if kind == mqtt_wire.CONNACK and not self.connacked.done():
                reason, _ = mqtt_wire.connack(bytes(self.buffer[start:end]))
                if reason:
                    self.connacked.set_exception(ConnectionError(f"CONNACK reason 0x{reason:02x}"))
                    continue
                self.transport.write(
                    mqtt_wire.subscribe(1, commands_topic(self.device_id))
                    + mqtt_wire.publish(availability_topic(self.device_id), b"online", 2, retain=True)
                )
                self.connacked.set_result(None)
            elif kind == mqtt_wire.PUBLISH and first & 0x06:  # a command at QoS 1: acknowledged
                self.transport.write(mqtt_wire.pubacks([mqtt_wire.publish_packet_id(self.buffer, start)]))
        del self.buffer[:consumed]

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if not self.connacked.done():
            self.connacked.set_exception(ConnectionError(f"closed before CONNACK: {exc!r}"))


async def _hold(job: dict[str, Any]) -> None:
    raise_open_files_limit()
    loop = asyncio.get_running_loop()
    devices: list[list[str]] = job["devices"]  # [device id, password]
    held: list[_HeldDevice] = []
    failed: list[str] = []
    gate = asyncio.Semaphore(int(job.get("concurrency", 200)))

    async def connect(device_id: str, password: str) -> None:
        async with gate:
            for attempt in range(ATTEMPTS):  # a refused device tries again, as the SDK's backoff does
                try:
                    _, device = await loop.create_connection(
                        lambda: _HeldDevice(device_id, password), job["host"], int(job["port"])
                    )
                    await asyncio.wait_for(device.connacked, 30)
                except Exception as error:  # counted and reported, not raised
                    if attempt == ATTEMPTS - 1:
                        failed.append(f"{device_id}: {type(error).__name__}: {error}")
                        return
                    await asyncio.sleep(1.0)
                    continue
                held.append(device)
                break
            if len(held) % 1000 == 0:
                print(f"connected {len(held)}", flush=True)

    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)  # "go"
    started = time.time()
    await asyncio.gather(*(connect(d, p) for d, p in devices))
    took = time.time() - started
    await asyncio.sleep(2.0)  # the last SUBACKs and births
    connected = sum(1 for d in held if d.open)
    print(
        json.dumps({"held": connected, "seconds": took, "failed": len(failed), "errors": failed[:5]}),
        flush=True,
    )
    await loop.run_in_executor(None, sys.stdin.readline)  # "stop"
    print(json.dumps({"still_connected": sum(1 for d in held if d.open)}), flush=True)
    for device in held:  # dropped without DISCONNECT: the broker publishes each one's will
        if device.transport is not None:
            device.transport.close()


class LoadProcess:
    """One ``python -m hearth_bench.load.mqtt_load`` process (or another ``module``'s): a JSON job in, lines
    out."""

    def __init__(
        self, command: str, job: dict[str, Any], *, module: str = "hearth_bench.load.mqtt_load"
    ) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    async def line(self) -> str:
        assert self.proc.stdout is not None
        line = await asyncio.get_running_loop().run_in_executor(None, self.proc.stdout.readline)
        if not line:
            raise RuntimeError(f"the load process ended (exit {self.proc.wait()})")
        return line.strip()

    def say(self, word: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()

    def cpu_seconds(self) -> float:
        with suppress(psutil.Error):
            return float(sum(psutil.Process(self.proc.pid).cpu_times()[:2]))
        return 0.0

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Profiler:
    """``py-spy record`` of a process into ``path`` (collapsed stacks) while it runs, if py-spy is
    installed (it is no dependency of the project: ``pip install py-spy``); ``stop`` ends it and returns
    the busiest functions (``gateway_figures.top_frames``)."""

    def __init__(self, pid: int, path: Path) -> None:
        self.path = path
        self.proc: subprocess.Popen[bytes] | None = None
        spy = shutil.which("py-spy")
        if spy is None:
            print("py-spy is not installed: no profile", file=sys.stderr)
            return
        argv = [spy, "record", "--pid", str(pid), "--rate", "200", "--format", "raw", "--output", str(path)]
        self.proc = subprocess.Popen([*argv, "--nonblocking"], stdout=subprocess.DEVNULL)

    def stop(self) -> dict[str, list[tuple[str, float]]]:
        if self.proc is None:
            return {}
        self.proc.send_signal(signal.SIGINT)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.path.exists():
            return {}
        return top_frames(self.path.read_text())


def main() -> None:
    import uvloop

    command = sys.argv[1]
    job = json.loads(sys.stdin.readline())
    if command == "publish":
        print(json.dumps(uvloop.run(_publish(job))), flush=True)
    elif command == "count":
        print(json.dumps(uvloop.run(_count(job))), flush=True)
    elif command == "hold":
        uvloop.run(_hold(job))
    else:
        raise SystemExit(f"unknown command {command!r}: publish, count or hold")


if __name__ == "__main__":
    main()
