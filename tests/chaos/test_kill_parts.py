"""kill -9 each part of a supervised stack in turn under steady commands: the supervisor brings it back,
and no command that got a 202 is lost, doubled or stuck; the journal holds each device's facts once, in
versions 1..N; the live views equal a replay (verify). Recovery times go to .hearth/chaos.json.

Commands carry an Idempotency-Key; a request that failed during a kill (no answer, 5xx) is sent again
with the same key, as a client would. The devices are real MQTT devices (the hearth_device SDK, with the
credentials their registration issued: ack, then report what was asked), so the broker, the broker-access
follower and the device gateway are killed too. Mosquitto saves its sessions every 30 s
(``autosave_interval``), and its kill comes later than that, so the sessions it restores hold every
device's subscription; what it had accepted and not yet delivered at the moment it died is lost, and a
command that loses its ack or report that way expires (a terminal status, which the test accepts; the
probe command sent after each recovery must converge).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer

from hearth_device import DeviceConnection
from hearth_devstack.local import LocalStack
from hearth_read_models.rebuild.run import verify
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.store.db import connect
from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.auth import create_token
from hearth_shared.schema.events import TERMINAL_STATUSES, CommandRequested, decode_event
from tests.support.mqtt_devices import connected
from tests.support.waiting import eventually, poll_until

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(1500)]

KILLED = [
    "device-actor",
    "device-gateway",
    "projector",
    "command-api",
    "query-api",
    "redis",
    "postgres",
    "broker-access",
    "mosquitto",  # last: its sessions were saved (autosave_interval 30 s) long before
]
MQTT_PARTS = {"device-gateway", "broker-access", "mosquitto"}
DEVICES = 6
RATE = 4.0  # commands per second, spread over the devices
HEARTBEAT_S = 5.0
SETTLE_S = 3.0  # steady commands between one part's recovery and the next kill
# Each run's recovery times, beside the suite's durations (untracked: a test run leaves the checkout clean;
# bench/results/chaos.json is the copy docs/BENCHMARKS.md was written from).
RESULTS = Path(__file__).resolve().parents[2] / ".hearth" / "chaos.json"
INITIAL = {"ambient_c": 19.0, "hvac_mode": "heat", "hvac_action": "idle", "target_c": 19.0}


@dataclass
class Ledger:
    """What the clients saw: every command that got a 202, and how many requests were sent again."""

    accepted: dict[str, str] = field(default_factory=dict)  # command id -> device id
    retried: int = 0
    keys: dict[str, str] = field(default_factory=dict)  # Idempotency-Key -> command id


async def command(api: httpx.AsyncClient, ledger: Ledger, device_id: str, target_c: float) -> str:
    """POST a command until it gets a 202, the same Idempotency-Key on every attempt; its id."""
    key = uuid.uuid4().hex
    body = {"name": "set_target_temperature", "params": {"target_c": target_c}}
    deadline = time.monotonic() + 120
    while True:
        try:
            response = await api.post(
                f"/v1/devices/{device_id}/commands", json=body, headers={"Idempotency-Key": key}, timeout=10
            )
            if response.status_code == 202:
                command_id = str(response.json()["command_id"])
                assert ledger.keys.setdefault(key, command_id) == command_id
                ledger.accepted[command_id] = device_id
                return command_id
            assert response.status_code >= 500, f"{response.status_code}: {response.text}"
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"no 202 for {device_id} within 120 s"
        ledger.retried += 1
        await asyncio.sleep(0.5)


async def drive(api: httpx.AsyncClient, ledger: Ledger, devices: list[str], stop: asyncio.Event) -> None:
    """Steady commands at RATE, each in its own task (a request held up by a kill holds up no other)."""
    sent: list[asyncio.Task[str]] = []
    n = 0
    while not stop.is_set():
        target_c = 16.0 + (n % 24) * 0.5
        sent.append(asyncio.create_task(command(api, ledger, devices[n % len(devices)], target_c)))
        n += 1
        await asyncio.sleep(1 / RATE)
    await asyncio.gather(*sent)


async def play(device: DeviceConnection) -> None:
    """The device: acknowledge each command it gets and report the target it was asked for."""
    while True:
        dispatched = await device.next_command(timeout_s=3600)
        await device.ack(dispatched)
        await device.report({"target_c": dispatched.params["target_c"], "hvac_action": "heating"})


async def heartbeat(device: DeviceConnection) -> None:
    """A reading every few seconds, as a real thermostat sends: a device silent for the actor's offline
    limit (60 s) is offline, and its commands are held until they expire."""
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        await device.report({"ambient_c": INITIAL["ambient_c"]})


async def status_of(
    query: httpx.AsyncClient, command_id: str, limit: asyncio.Semaphore | None = None
) -> str | None:
    async with limit or contextlib.nullcontext():
        try:
            response = await query.get(f"/v1/commands/{command_id}", timeout=5)
        except httpx.TransportError:
            return None
    return str(response.json()["status"]) if response.status_code == 200 else None


async def healthy_again(stack: LocalStack, name: str, restarts_before: int, timeout_s: float = 180) -> None:
    supervisor = stack.supervisor
    assert supervisor is not None

    def part_now() -> Any:
        return next(p for p in supervisor.snapshot() if p.name == name)

    def restarted_healthy() -> bool:
        part = part_now()
        assert part.state != "failed", f"the supervisor gave up on {name}: {part.last_exit}"
        return bool(part.restarts > restarts_before and part.state == "running" and part.health == "healthy")

    await eventually(
        restarted_healthy, f"{name} healthy again", timeout_s=timeout_s, every_s=0.1, shown=part_now
    )


async def devices_back(connections: list[DeviceConnection], timeout_s: float = 60) -> None:
    """Until every device is connected again (they reconnect by themselves, with backoff)."""
    await eventually(
        lambda: all(d.link.client.is_connected for d in connections),
        "every device connected again",
        timeout_s=timeout_s,
        every_s=0.1,
    )


async def kill_and_recover(
    stack: LocalStack,
    name: str,
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    ledger: Ledger,
    probe: str,
    connections: list[DeviceConnection],
) -> dict[str, Any]:
    """kill -9 the part's process; seconds to healthy again (and, for an MQTT part, until every device
    is connected again), then to a new command converging."""
    assert stack.supervisor is not None
    restarts = next(p.restarts for p in stack.supervisor.snapshot() if p.name == name)
    victim = stack.supervisor.child(name)
    assert victim is not None and victim.pid is not None
    killed_at, killed_wall = time.monotonic(), time.strftime("%H:%M:%S", time.gmtime())
    os.kill(victim.pid, signal.SIGKILL)
    await healthy_again(stack, name, restarts)
    healthy_s = time.monotonic() - killed_at
    if name in MQTT_PARTS:
        await devices_back(connections)
    command_id = await command(api, ledger, probe, 20.0 + len(ledger.accepted) % 10 * 0.5)
    status = await poll_until(
        lambda: status_of(query, command_id),
        lambda status: status in TERMINAL_STATUSES,
        f"probe command {command_id} to end",
        timeout_s=240 - (time.monotonic() - killed_at),
    )
    assert status == "converged", f"probe command {command_id} after the {name} kill ended {status}"
    converged_s = time.monotonic() - killed_at
    return {
        "part": name,
        "pid": victim.pid,
        "killed_at": killed_wall,
        "healthy_s": round(healthy_s, 2),
        "converged_s": round(converged_s, 2),
    }


async def read_journal(settings: StackSettings) -> list[Any]:
    """Every journal record, from the first offset to the end offsets of now."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = await topic_partitions(consumer, settings.topics.journal)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        events = []
        while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                events += [decode_event(r.value) for r in records]
        return events
    finally:
        await consumer.stop()


def journal_faults(events: list[Any]) -> dict[str, Any]:
    """Per device: versions that are not exactly 1..N in order; records appended again (a repeated
    event id, listed with when they were recorded); commands requested twice (distinct facts)."""
    versions: dict[str, list[int]] = defaultdict(list)
    for e in events:
        versions[e.device_id].append(e.version)
    ids = Counter(e.event_id for e in events)
    requested: dict[Any, set[Any]] = defaultdict(set)
    for e in events:
        if isinstance(e, CommandRequested):
            requested[e.correlation_id].add(e.event_id)
    repeated = {e.event_id: e for e in events if ids[e.event_id] > 1}
    return {
        "records": len(events),
        "devices_out_of_order": sorted(d for d, v in versions.items() if v != list(range(1, len(v) + 1))),
        "repeated_event_ids": sum(n - 1 for n in ids.values() if n > 1),
        "repeated": [
            {
                "device_id": e.device_id,
                "version": e.version,
                "type": type(e).__name__,
                "recorded_at": e.recorded_at.isoformat(),
                "times": ids[e.event_id],
            }
            for e in repeated.values()
        ],
        "doubled_requests": sum(1 for facts in requested.values() if len(facts) > 1),
    }


async def test_killing_each_part_loses_doubles_and_strands_nothing(supervised_stack: LocalStack) -> None:
    stack = supervised_stack
    settings = stack.settings
    command_api, query_api = (
        f"http://127.0.0.1:{p}" for p in (stack.ports.command_api, stack.ports.query_api)
    )
    headers = {"Authorization": f"Bearer {create_token(settings.token_secret, admin=True)}"}
    ledger, recoveries = Ledger(), []
    connections: list[DeviceConnection] = []
    async with (
        httpx.AsyncClient(base_url=command_api, headers=headers) as api,
        httpx.AsyncClient(base_url=query_api, headers=headers) as query,
    ):
        devices = [f"chaos-thermostat-{i}" for i in range(DEVICES + 1)]
        for device_id in devices:
            body = {"device_id": device_id, "home_id": "chaos", "type": "thermostat", "name": device_id}
            response = await api.post("/v1/devices", json=body)
            assert response.status_code == 201, response.text
            password = response.json()["credentials"]["password"]
            # Back soon after a broker restart: at most 2 s between attempts.
            device = await connected(stack.mosquitto, device_id, password, 60.0, backoff_max_s=2.0)
            connections.append(device)
            await device.report(INITIAL)
        players = [asyncio.create_task(play(d)) for d in connections]
        players += [asyncio.create_task(heartbeat(d)) for d in connections]
        stop = asyncio.Event()
        driver = asyncio.create_task(drive(api, ledger, devices[1:], stop))
        probe = devices[0]  # the recovery probe's own device: its command is never superseded by load
        started = time.monotonic()
        for name in KILLED:
            await asyncio.sleep(SETTLE_S)
            recoveries.append(await kill_and_recover(stack, name, api, query, ledger, probe, connections))
            print(f"chaos: {recoveries[-1]}", flush=True)
        await asyncio.sleep(SETTLE_S)
        stop.set()
        await driver
        load_s = time.monotonic() - started

        statuses: dict[str, str | None] = {}

        async def all_ended() -> bool:
            pending = [c for c in ledger.accepted if statuses.get(c) not in TERMINAL_STATUSES]
            # A thousand commands after a long run: a few requests at a time, or most of them would time
            # out waiting for a connection on a busy machine (and read as lost).
            limit = asyncio.Semaphore(16)
            found = await asyncio.gather(*(status_of(query, c, limit) for c in pending))
            statuses.update(zip(pending, found, strict=True))
            return all(s in TERMINAL_STATUSES for s in statuses.values())

        # The default 30 s expiry ends any command left behind; one still open after 90 s is counted below.
        with contextlib.suppress(AssertionError):
            await eventually(all_ended, "every accepted command to end", timeout_s=90, every_s=1)
        for player in players:
            player.cancel()
        for device in connections:
            await device.close(offline=False)

    lost = sorted(c for c, s in statuses.items() if s is None)
    stuck = sorted(c for c, s in statuses.items() if s is not None and s not in TERMINAL_STATUSES)
    read_models = ReadModelSettings(stack=settings)
    async with await connect(settings.postgres_dsn, read_models.schema_name) as conn:
        rows = await (await conn.execute("SELECT command_id::text FROM commands")).fetchall()
        requested = await (
            await conn.execute(
                "SELECT correlation_id::text, count(*) FROM device_events"
                " WHERE type = 'command.requested' GROUP BY 1 HAVING count(*) > 1"
            )
        ).fetchall()
    in_views = Counter(r[0] for r in rows)
    doubled = sorted({c for c in ledger.accepted if in_views[c] > 1} | {r[0] for r in requested})
    journal = journal_faults(await read_journal(settings))
    verified = await verify(read_models)
    differences = sum(verified.counts.values())

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average": os.getloadavg()[0],
        "commands_per_s": RATE,
        "load_s": round(load_s, 1),
        "commands": len(ledger.accepted),
        "retried_requests": ledger.retried,
        "statuses": Counter(statuses.values()),
        "lost": len(lost), "doubled": len(doubled), "stuck": len(stuck),
        "journal": journal,
        "verify_differences": differences,
        "recovery": recoveries,
    }, indent=1) + "\n")  # fmt: skip

    assert (lost, doubled, stuck) == ([], [], []), f"lost {lost}, doubled {doubled}, stuck {stuck}"
    faults = {k: journal[k] for k in ("devices_out_of_order", "repeated_event_ids", "doubled_requests")}
    assert faults == {"devices_out_of_order": [], "repeated_event_ids": 0, "doubled_requests": 0}, journal
    assert differences == 0, verified.counts
