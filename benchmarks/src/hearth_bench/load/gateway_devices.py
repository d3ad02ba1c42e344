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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from hearth_bench.figures.gateway_figures import per_connection_kib
from hearth_bench.harness.stack import BenchStack, console, counting_progress
from hearth_bench.load.mqtt_load import LoadProcess
from hearth_devstack.servers.mosquitto import MqttAccount, mqtt_connect_code
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.schema.credentials import hash_secret, new_credential_id
from hearth_shared.schema.events import IssueCredentials, RegisterDevice, encode, new_id, utcnow
from hearth_shared.schema.shards import DEFAULT_SHARD

HOME = "bench-gateway"


@dataclass(frozen=True)
class Broker:
    """One MQTT broker of the stack as the devices see it: its part's name, port and access files."""

    part: str
    shard: str
    port: int
    access_dir: Path

    @classmethod
    def all_of(cls, stack: BenchStack) -> list[Broker]:
        """The stack's brokers, shard 0 first (``bench_stack(mqtt_brokers=...)``)."""
        services = stack.services
        assert services.mqtt_access_dir is not None
        first = cls("mosquitto", DEFAULT_SHARD, services.mqtt_port, services.mqtt_access_dir)
        more = [cls(f"mosquitto-{b.name}", b.name, b.port, b.access_dir) for b in services.more_shards]
        return [first, *more]


async def register_devices(
    stack: BenchStack,
    thermostats: list[str],
    devices: list[tuple[str, str]],
    shard_of: Callable[[str], str] = lambda _: DEFAULT_SHARD,
) -> None:
    """Registration requests on the inbox (and credentials for ``devices``: (id, secret) pairs), each
    device on the MQTT shard ``shard_of`` gives it (as the command API would pick it)."""
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
                shard=shard_of(device_id),
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
    stack: BenchStack, devices: list[tuple[str, str]], broker: Broker | None = None, timeout_s: float = 300.0
) -> None:
    """Until ``broker``'s password file (default: the first's) holds every one of ``devices``'
    credentials and the broker has read it (it accepts the last device's CONNECT: the file is written
    before the reload)."""
    broker = broker or Broker.all_of(stack)[0]
    count = len(devices)
    passwd = broker.access_dir / "passwd"
    deadline = time.monotonic() + timeout_s
    with counting_progress() as progress:
        task = progress.add_task(f"credentials in {broker.part}'s password file", total=count)
        while True:
            lines = sum(1 for line in passwd.read_text().splitlines() if line and not line.startswith("_"))
            progress.update(task, completed=lines)
            if lines >= count and (not devices or _accepted(broker, *devices[-1])):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{lines} of {count} credentials reached {broker.part} in {timeout_s:g} s")
            stack.check_running()
            await asyncio.sleep(0.5)


def _accepted(broker: Broker, device_id: str, secret: str) -> bool:
    return mqtt_connect_code("127.0.0.1", broker.port, MqttAccount(device_id, secret)) == 0


def _rss(stack: BenchStack, name: str) -> int:
    return int(psutil.Process(stack.pid(name)).memory_info().rss)


async def hold_connections(
    stack: BenchStack, devices: Mapping[Broker, list[tuple[str, str]]], parts: Mapping[str, Broker | None]
) -> dict[str, Any]:
    """``devices`` connect at once to their brokers, one holder process per broker (``mqtt_load hold``:
    each holds at most its open-files limit); ``parts``' resident memory before and after, per
    connection held: a part's growth divided by the connections its broker holds (None: all of them)."""
    before = {name: _rss(stack, name) for name in parts}
    holders = {
        broker: LoadProcess(
            "hold", {"host": "127.0.0.1", "port": broker.port, "devices": [list(d) for d in held]}
        )
        for broker, held in devices.items()
    }
    try:
        for holder in holders.values():
            if (line := await holder.line()) != "ready":
                raise RuntimeError(f"holder: {line}")
        total = sum(len(held) for held in devices.values())
        console.print(
            f"connections: {total:,} devices, each with its own credentials, to {len(holders)} broker(s)"
        )
        for holder in holders.values():
            holder.say("go")

        async def held_by(holder: LoadProcess) -> dict[str, Any]:
            while (line := await holder.line()).startswith("connected"):
                pass
            return dict(json.loads(line))

        results = dict(zip(holders, await asyncio.gather(*map(held_by, holders.values())), strict=True))
        await asyncio.sleep(3.0)  # the births through the gateway, the broker's buffers settled
        after = {name: _rss(stack, name) for name in parts}
        holder_rss = sum(int(psutil.Process(h.proc.pid).memory_info().rss) for h in holders.values())
        for holder in holders.values():
            holder.say("stop")
        for broker, holder in holders.items():
            results[broker] |= json.loads(await holder.line())
    finally:
        for holder in holders.values():
            holder.close()
    held_on = {broker.part: results[broker]["held"] for broker in devices}

    connections_of = {
        name: results[broker]["held"] if broker is not None else sum(held_on.values())
        for name, broker in parts.items()
    }

    def per_connection(name: str) -> float:
        return round(per_connection_kib(before[name], after[name], max(1, connections_of[name])), 2)

    return {
        "held": sum(r["held"] for r in results.values()),
        "seconds": max(r["seconds"] for r in results.values()),
        "failed": sum(r["failed"] for r in results.values()),
        "errors": [e for r in results.values() for e in r["errors"]][:5],
        "still_connected": sum(r["still_connected"] for r in results.values()),
        "held_per_broker": held_on,
        "connections_of": connections_of,
        "rss_before_mb": {n: round(before[n] / 2**20, 1) for n in parts},
        "rss_after_mb": {n: round(after[n] / 2**20, 1) for n in parts},
        "kib_per_connection": {n: per_connection(n) for n in parts},
        "holder_rss_mb": round(holder_rss / 2**20, 1),
    }
