"""The devices of ``hearth bench gateway``: registered through the inbox, given credentials, and
held connected at once (``mqtt_load hold``), with the gateway's and the broker's memory per connection.

Registration takes the command API's path behind the HTTP layer: ``register_device`` and
``issue_credentials`` requests (a fresh secret's ``$7$`` hash, the secret kept here) on the inbox; the
device actor records the facts, and the broker-access follower writes them into the broker's password
file and makes it reload. ``wait_credentials`` waits until the file holds them all.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import psutil

from hearth_bench.gateway_figures import per_connection_kib
from hearth_bench.mqtt_load import LoadProcess
from hearth_bench.stack import BenchStack, console, counting_progress
from hearth_devstack.mosquitto import MqttAccount, mqtt_connect_code
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.schema.credentials import hash_secret, new_credential_id
from hearth_shared.schema.events import IssueCredentials, RegisterDevice, encode, new_id, utcnow

HOME = "bench-gateway"


async def register_devices(stack: BenchStack, thermostats: list[str], devices: list[tuple[str, str]]) -> None:
    """Registration requests on the inbox (and credentials for ``devices``: (id, secret) pairs)."""
    producer = make_producer(stack.settings.kafka_bootstrap_servers, "bench-gateway-register", linger_ms=20)
    await producer.start()
    now, inbox = utcnow(), stack.settings.topics.inbox
    try:
        for device_id in [*thermostats, *(d for d, _ in devices)]:
            request = RegisterDevice(
                request_id=new_id(),
                device_id=device_id,
                sent_at=now,
                home_id=HOME,
                device_type="thermostat",
                name=device_id,
            )
            await producer.send(inbox, encode(request), key=device_id.encode())
        for device_id, secret in devices:
            issue = IssueCredentials(
                request_id=new_id(),
                device_id=device_id,
                sent_at=now,
                credential_id=new_credential_id(),
                password_hash=hash_secret(secret),
            )
            await producer.send(inbox, encode(issue), key=device_id.encode())
        await producer.flush()
    finally:
        await producer.stop()


async def wait_credentials(
    stack: BenchStack, devices: list[tuple[str, str]], timeout_s: float = 300.0
) -> None:
    """Until the broker's password file holds every one of ``devices``' credentials and the broker has
    read it (it accepts the last device's CONNECT: the file is written before the reload)."""
    count = len(devices)
    access_dir = stack.services.mqtt_access_dir
    assert access_dir is not None
    passwd = access_dir / "passwd"
    deadline = time.monotonic() + timeout_s
    with counting_progress() as progress:
        task = progress.add_task("credentials in the broker's password file", total=count)
        while True:
            lines = sum(1 for line in passwd.read_text().splitlines() if line and not line.startswith("_"))
            progress.update(task, completed=lines)
            if lines >= count and (not devices or _accepted(stack, *devices[-1])):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{lines} of {count} credentials reached the broker in {timeout_s:g} s")
            stack.check_running()
            await asyncio.sleep(0.5)


def _accepted(stack: BenchStack, device_id: str, secret: str) -> bool:
    account = MqttAccount(device_id, secret)
    return mqtt_connect_code("127.0.0.1", stack.services.mqtt_port, account) == 0


def _rss(stack: BenchStack, name: str) -> int:
    return int(psutil.Process(stack.pid(name)).memory_info().rss)


async def hold_connections(stack: BenchStack, devices: list[tuple[str, str]]) -> dict[str, Any]:
    parts = ("device-gateway", "mosquitto")
    before = {name: _rss(stack, name) for name in parts}
    job = {"host": "127.0.0.1", "port": stack.services.mqtt_port, "devices": [list(d) for d in devices]}
    holder = LoadProcess("hold", job)
    try:
        if (line := await holder.line()) != "ready":
            raise RuntimeError(f"holder: {line}")
        console.print(f"connections: {len(devices):,} devices connect, each with its own credentials")
        holder.say("go")
        while (line := await holder.line()).startswith("connected"):
            console.print(f"[dim]{line}[/]")
        held = json.loads(line)
        await asyncio.sleep(3.0)  # the births through the gateway, the broker's buffers settled
        after = {name: _rss(stack, name) for name in parts}
        holder_rss = int(psutil.Process(holder.proc.pid).memory_info().rss)
        holder.say("stop")
        held |= json.loads(await holder.line())
    finally:
        holder.close()
    count = max(1, held["held"])
    return {
        **held,
        "rss_before_mb": {n: round(before[n] / 2**20, 1) for n in parts},
        "rss_after_mb": {n: round(after[n] / 2**20, 1) for n in parts},
        "kib_per_connection": {n: round(per_connection_kib(before[n], after[n], count), 2) for n in parts},
        "holder_rss_mb": round(holder_rss / 2**20, 1),
    }
