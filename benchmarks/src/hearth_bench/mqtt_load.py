"""The MQTT side of ``hearth bench gateway``, as separate processes (so the devices' CPU is not the
bench's reading side's): ``python -m hearth_bench.mqtt_load publish|hold`` reads a JSON job on its first
line of standard input, says ``ready`` on standard output, and starts on a ``go`` line.

* ``publish``: ``connections`` gmqtt connections (``MqttLink``, QoS 1, the devices' client library)
  publish ``reports`` state reports (``gateway_figures.report_payloads``) on ``<root>/<device id>/state``;
  each device's reports go through one connection, in seq order. It answers one JSON line: when the first
  publish started and when the broker had acknowledged the last (wall clock).
* ``hold``: one connection per device, each with its own credentials (username = device id), subscribed
  to its own ``commands`` topic with its will on ``availability``, as a device of the SDK does; it says
  ``connected N`` as they come up and ``held N`` when every one is up (or gave up), then holds them until
  ``stop``.

The floor's subscriber (``FloorSubscriber``) runs in the bench's process: a gmqtt client with the
gateway's receive maximum and acknowledgement (the PUBACK when the async handler returns), doing nothing
but count.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import shutil
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil
from gmqtt import Client, Message
from gmqtt.mqtt.constants import MQTTv50

from hearth_bench.gateway_figures import Arrivals, report_payloads, top_frames
from hearth_shared.adapters.mqtt_link import MqttLink
from hearth_shared.schema.mqtt import availability_topic, commands_topic

ATTEMPTS = 3  # connection attempts per held device


def raise_open_files_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def _publish(job: dict[str, Any]) -> dict[str, Any]:
    ids: list[str] = job["device_ids"]
    count = int(job["connections"])
    links = [
        MqttLink(
            client_id=f"bench-publisher-{job['name']}-{c}",
            username=job["username"],
            password=job["password"],
            persistent=False,
        )
        for c in range(count)
    ]
    work: list[list[tuple[str, bytes]]] = [[] for _ in links]
    for device, payload in report_payloads(len(ids), int(job["reports"]), at=job["at"]):
        work[device % count].append((f"{job['root']}/{ids[device]}/state", payload))
    for link in links:
        await link.connect(job["host"], int(job["port"]))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # "go"
    started = time.time()
    acknowledged = [
        link.publish(topic, payload)
        for link, messages in zip(links, work, strict=True)
        for topic, payload in messages
    ]
    await asyncio.gather(*acknowledged)
    done = time.time()
    for link in links:
        await link.disconnect()
    return {"started": started, "acknowledged": done, "published": len(acknowledged)}


async def _hold(job: dict[str, Any]) -> None:
    raise_open_files_limit()
    logging.getLogger("gmqtt").setLevel(logging.CRITICAL)  # refusals are counted here instead
    devices: list[list[str]] = job["devices"]  # [device id, password]
    clients: list[Client] = []
    failed: list[str] = []
    gate = asyncio.Semaphore(int(job.get("concurrency", 100)))

    async def connect(device_id: str, password: str) -> None:
        async with gate:
            for attempt in range(ATTEMPTS):  # a refused device tries again, as the SDK's backoff does
                will = Message(availability_topic(device_id), b"offline", qos=1, retain=True)
                client = Client(device_id, clean_session=True, session_expiry_interval=0, will_message=will)
                client.set_auth_credentials(device_id, password)
                client.set_config({"reconnect_retries": 0})
                try:
                    await client.connect(job["host"], int(job["port"]), keepalive=60, version=MQTTv50)
                except Exception as error:  # counted and reported, not raised
                    if attempt == ATTEMPTS - 1:
                        failed.append(f"{device_id}: {type(error).__name__}: {error}")
                        return
                    await asyncio.sleep(1.0)
                    continue
                client.subscribe(commands_topic(device_id), qos=1)
                client.publish(availability_topic(device_id), b"online", qos=1, retain=True)
                clients.append(client)
                break
            if len(clients) % 500 == 0:
                print(f"connected {len(clients)}", flush=True)

    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)  # "go"
    started = time.time()
    await asyncio.gather(*(connect(d, p) for d, p in devices))
    took = time.time() - started
    await asyncio.sleep(2.0)  # the last SUBACKs and births
    connected = sum(1 for c in clients if c.is_connected)
    print(
        json.dumps({"held": connected, "seconds": took, "failed": len(failed), "errors": failed[:5]}),
        flush=True,
    )
    await loop.run_in_executor(None, sys.stdin.readline)  # "stop"
    print(json.dumps({"still_connected": sum(1 for c in clients if c.is_connected)}), flush=True)
    await asyncio.gather(*(c.disconnect() for c in clients if c.is_connected), return_exceptions=True)


class FloorSubscriber:
    """The floor: a gmqtt client subscribed (shared, QoS 1) to ``<root>/+/state``, counting arrivals,
    acknowledging each message when its (empty) async handler returns, like the gateway."""

    def __init__(self, *, host: str, port: int, username: str, password: str, receive_maximum: int) -> None:
        self.host, self.port = host, port
        self.arrivals = Arrivals()
        self.link = MqttLink(
            client_id="bench-floor-subscriber",
            username=username,
            password=password,
            persistent=False,
            receive_maximum=receive_maximum,
        )

    async def start(self, root: str) -> None:
        self.link.route(self._count)
        await self.link.connect(self.host, self.port)
        self.link.subscribe(f"$share/bench-floor/{root}/+/state")
        await self.link.subscribed()

    async def _count(self, _topic: str, _payload: bytes) -> None:
        self.arrivals.add(1, time.time())

    async def stop(self) -> None:
        await self.link.disconnect()


class LoadProcess:
    """One ``python -m hearth_bench.mqtt_load`` process: a JSON job in, lines out."""

    def __init__(self, command: str, job: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hearth_bench.mqtt_load", command],
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


def own_cpu_seconds() -> float:
    """CPU seconds (user + system) this process used so far."""
    return float(sum(psutil.Process().cpu_times()[:2]))


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
    elif command == "hold":
        uvloop.run(_hold(job))
    else:
        raise SystemExit(f"unknown command {command!r}: publish or hold")


if __name__ == "__main__":
    main()
