"""A broker of a 3-node KRaft cluster killed with -9 under steady commands, then brought back.

The cluster runs from the same code as ``hearth up --brokers 3`` (``KafkaCluster``: every topic 3
replicas, min.insync.replicas 2), the services as in ``hearth up`` (``Services``), the devices are
played by ``DeviceLink``. Commands go at a steady rate, each with its own Idempotency-Key, retried with
the same key when a call fails. The broker leading the most journal and inbox partitions is killed,
kept down ``DOWN_S`` seconds, started again; the test measures how long until it is back in the ISR of
every partition it holds, and the longest pause it caused in the commands. Then it checks:

* no command that got a 202 is lost: each one reached a terminal status (converged, or superseded by
  the next command to the same device; none expired at its default deadline of 30 s) and the last one
  per device converged;
* nothing doubled: one ``command.requested`` per Idempotency-Key, each event_id once in the journal,
  each device's versions 1..N in journal order;
* the views equal a replay of the journal (``verify``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import signal
import statistics
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from hearth_devstack.launch.service_processes import Services, services_running
from hearth_devstack.servers.kafka_cluster import KafkaCluster, stop_together
from hearth_devstack.servers.postgres import PostgresServer
from hearth_devstack.servers.redis import RedisServer
from hearth_devstack.supervision.ports import free_port
from hearth_devstack.supervision.process import ManagedProcess
from hearth_devstack.workload.journal_check import read_journal
from hearth_read_models.rebuild.run import verify
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.adapters.http_calls import GatedClient
from hearth_shared.adapters.kafka import ensure_topics
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import TERMINAL_STATUSES, CommandRequested, Event
from tests.support.device_link import DeviceLink
from tests.support.platform import SECRET, Platform
from tests.support.waiting import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(480)]

NODES = 3
DEVICES = 6
RATE_PER_S = 6.0  # commands per second over all devices: one a second per device
BEFORE_S = 4.0  # steady load before the kill
DOWN_S = 10.0  # how long the broker stays dead
AFTER_S = 5.0  # steady load once it is back in the ISR
RESULTS = Path(os.environ.get("HEARTH_CHAOS_RESULTS", "")) if os.environ.get("HEARTH_CHAOS_RESULTS") else None


def chaos_schema(settings: StackSettings) -> str:
    """The read models' own schema (the session's ``platform`` uses the default one)."""
    return f"{settings.topic_prefix}_views"


@dataclass
class Cluster:
    kafka: KafkaCluster
    parts: dict[int, ManagedProcess]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A 3-node cluster on free ports, as `hearth up --brokers 3` runs it."""
    home = tmp_path_factory.mktemp("cluster")
    kafka = KafkaCluster(
        data_dir=home / "kafka",
        log_dir=home,
        ports=[free_port() for _ in range(NODES)],
        controller_ports=[free_port() for _ in range(NODES)],
    )
    parts = dict(zip(range(1, NODES + 1), kafka.processes(), strict=True))
    try:
        for part in parts.values():
            part.start()
        for part in parts.values():
            part.wait_healthy(180)
        kafka.wait_formed(60)
        yield Cluster(kafka, parts)
    finally:
        stop_together(list(parts.values()))


@pytest.fixture(scope="module")
def chaos_platform(
    cluster: Cluster, postgres: PostgresServer, redis_server: RedisServer, servers_dir: Path
) -> Iterator[Platform]:
    """The four services on the cluster, with their own topics (3 replicas) and their own schema."""
    run = uuid.uuid4().hex[:8]
    settings = StackSettings(
        kafka_bootstrap_servers=cluster.kafka.bootstrap,
        kafka_replication_factor=NODES,
        topic_prefix=f"chaos{run}",
        postgres_dsn=postgres.dsn,
        redis_url=redis_server.url,
        token_secret=SECRET,
    )
    asyncio.run(ensure_topics(settings.kafka_bootstrap_servers, settings.topics.specs()))
    services = Services(
        settings,
        logs=servers_dir / f"chaos-{run}",
        data=servers_dir / f"chaos-{run}-data",
        command_api_port=free_port(),
        query_api_port=free_port(),
        extra_env={
            "HEARTH_READ_MODELS_SCHEMA_NAME": chaos_schema(settings),
            "HEARTH_DEVICE_ACTOR_SESSION_TIMEOUT_S": "6",
            "HEARTH_DEVICE_ACTOR_OFFLINE_AFTER_S": "3600",
            # Devices on the inbox, no broker-access follower: no answer waits for a broker to load a secret.
            "HEARTH_COMMAND_API_CREDENTIALS_WAIT_S": "0",
        },
    )
    # All at once: each mostly waits for the broker; twice their patience: two busy cores, three JVMs.
    # Devices are played on the inbox (DeviceLink).
    names = services.names(simulate=False, devices_over_mqtt=False)
    with services_running(services, names, patience=2, together=True) as parts:
        yield Platform(
            settings,
            f"http://127.0.0.1:{services.command_api_port}",
            f"http://127.0.0.1:{services.query_api_port}",
            parts,
        )


@dataclass
class Sent:
    key: str
    device_id: str
    target_c: float
    sent: float
    answered: float = 0.0
    command_id: str = ""
    attempts: int = 0


@dataclass
class Load:
    """Steady commands, each with its own Idempotency-Key, retried with that key until a 202."""

    api: GatedClient
    devices: list[str]
    sent: list[Sent] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    async def run(self, stop: asyncio.Event) -> None:
        calls: set[asyncio.Task[None]] = set()
        started, n = time.monotonic(), 0
        while not stop.is_set():
            device_id = self.devices[n % len(self.devices)]
            command = Sent(f"chaos-{uuid.uuid4().hex}", device_id, 16.0 + (n % 24) * 0.5, time.monotonic())
            self.sent.append(command)
            calls.add(task := asyncio.create_task(self._submit(command)))
            task.add_done_callback(calls.discard)
            n += 1
            await asyncio.sleep(max(0.0, started + n / RATE_PER_S - time.monotonic()))
        await asyncio.gather(*calls)

    async def _submit(self, command: Sent) -> None:
        body = {"name": "set_target_temperature", "params": {"target_c": command.target_c}}
        while True:
            command.attempts += 1
            try:
                response = await self.api.post(
                    f"/v1/devices/{command.device_id}/commands",
                    json=body,
                    headers={"Idempotency-Key": command.key},
                    timeout=40.0,
                )
            except httpx.HTTPError as error:
                self.errors[type(error).__name__] += 1
            else:
                if response.status_code == 202:
                    command.answered, command.command_id = time.monotonic(), response.json()["command_id"]
                    return
                assert response.status_code >= 500, response.text  # a 4xx would be the test's own fault
                self.errors[str(response.status_code)] += 1
            await asyncio.sleep(0.5)


async def play_devices(link: DeviceLink, devices: list[str], stop: asyncio.Event) -> None:
    """Each device acknowledges every command it is sent and reports the target it was asked for."""

    async def play(device_id: str) -> None:
        while not stop.is_set():
            try:
                command = await link.next_command(device_id, timeout_s=1.0)
            except TimeoutError:
                continue
            state = {**command.params, "hvac_action": "heating"}
            await retried(functools.partial(link.ack, device_id, command.command_id))
            await retried(functools.partial(link.report, device_id, state))

    await asyncio.gather(*(play(d) for d in devices))


async def retried(send: Callable[[], Awaitable[Any]], attempts: int = 10) -> None:
    """The device side retries a send that failed while the cluster moved a partition's leader."""
    for attempt in range(attempts):
        try:
            await send()
            return
        except Exception:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.5)


async def leaders(bootstrap: str, topics: list[str]) -> tuple[Counter[int], int]:
    """How many of these topics' partitions each node leads, and the active controller's node id."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        led: Counter[int] = Counter(
            p["leader"] for t in await admin.describe_topics(topics) for p in t["partitions"]
        )
        cluster = await admin.describe_cluster()
        return led, int(cluster["controller_id"])
    finally:
        await admin.close()


async def outside_isr(bootstrap: str, node_id: int) -> int:
    """Partitions (of every topic, internal ones too) that have ``node_id`` as a replica but not in ISR."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await admin.start()
    try:
        topics = await admin.list_topics()
        described = await admin.describe_topics(topics)
        return sum(
            1
            for t in described
            for p in t["partitions"]
            if node_id in p["replicas"] and node_id not in p["isr"]
        )
    finally:
        await admin.close()


async def back_in_every_isr(bootstrap: str, node_id: int) -> bool:
    return await outside_isr(bootstrap, node_id) == 0


async def final_status(query: httpx.AsyncClient, command_id: str, deadline: float) -> dict[str, Any]:
    while True:
        response = await query.get(f"/v1/commands/{command_id}")
        if response.status_code == 200 and response.json()["status"] in TERMINAL_STATUSES:
            return dict(response.json())
        if time.monotonic() > deadline:
            return {"status": f"stuck ({response.status_code})", "history": []}
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def clients(platform: Platform) -> AsyncIterator[tuple[GatedClient, GatedClient]]:
    async with platform.client(platform.command_api) as api, platform.client(platform.query_api) as query:
        yield api, query


async def test_a_broker_killed_under_load_loses_and_doubles_nothing(
    cluster: Cluster, chaos_platform: Platform
) -> None:
    platform, settings, bootstrap = chaos_platform, chaos_platform.settings, cluster.kafka.bootstrap
    home = f"chaos-{uuid.uuid4().hex[:6]}"
    devices = [f"{home}-t{i}" for i in range(DEVICES)]
    async with clients(platform) as (api, query), DeviceLink(settings) as link:
        for device_id in devices:
            registered = await api.post(
                "/v1/devices",
                json={"device_id": device_id, "home_id": home, "type": "thermostat", "name": device_id},
            )
            assert registered.status_code == 201, registered.text
            await link.report(
                device_id, {"ambient_c": 19.0, "hvac_mode": "heat", "hvac_action": "idle", "target_c": 19}
            )
        stop_load, stop_devices = asyncio.Event(), asyncio.Event()
        load = Load(api, devices)
        player = asyncio.create_task(play_devices(link, devices, stop_devices))
        sender = asyncio.create_task(load.run(stop_load))

        await asyncio.sleep(BEFORE_S)
        led, controller = await leaders(bootstrap, [settings.topics.journal, settings.topics.inbox])
        victim = led.most_common(1)[0][0]
        killed_at = time.monotonic()
        os.killpg(cluster.parts[victim].proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
        cluster.parts[victim].proc.wait(10)  # type: ignore[union-attr]
        await asyncio.sleep(DOWN_S)
        restarted_at = time.monotonic()
        cluster.parts[victim].start()
        await asyncio.to_thread(cluster.parts[victim].wait_healthy, 120)
        answering_at = time.monotonic()
        await eventually(
            lambda: back_in_every_isr(bootstrap, victim),
            "the restarted broker back in every ISR",
            timeout_s=120 - (time.monotonic() - restarted_at),
            every_s=0.25,
        )
        in_isr_at = time.monotonic()
        await asyncio.sleep(AFTER_S)
        stop_load.set()
        await sender

        deadline = time.monotonic() + 60
        views = [await final_status(query, c.command_id, deadline) for c in load.sent]
        stop_devices.set()
        await player

    times = {"killed": killed_at, "restarted": restarted_at, "answering": answering_at, "in_isr": in_isr_at}
    figures = measured(load, views, times, victim, controller, led)
    print(json.dumps(figures, indent=1))
    if RESULTS is not None:
        RESULTS.write_text(json.dumps(figures, indent=1) + "\n")

    # every call got its 202 in the end (retried with its key), and every 202'd command ended
    assert all(c.command_id for c in load.sent)
    events = await read_journal(settings)
    statuses = Counter(v["status"] for v in views)
    assert set(statuses) <= {"converged", "superseded"}, unfinished(load, views, events, killed_at)
    last = {c.device_id: v["status"] for c, v in zip(load.sent, views, strict=True)}
    assert set(last.values()) == {"converged"}, last

    # nothing doubled: one command per key, every fact once, versions 1..N per device in journal order
    ids = Counter(e.event_id for e in events)
    doubled = {str(i): n for i, n in ids.items() if n > 1}
    assert doubled == {}, f"{len(doubled)} event ids appear more than once"
    requested = Counter(str(e.payload.command_id) for e in events if isinstance(e, CommandRequested))
    assert {c.command_id for c in load.sent} <= set(requested)
    assert all(requested[c.command_id] == 1 for c in load.sent)
    versions: dict[str, list[int]] = defaultdict(list)
    for e in events:
        versions[e.device_id].append(e.version)
    assert all(versions[d] == list(range(1, len(versions[d]) + 1)) for d in devices), versions

    # the views equal a replay of the journal
    read_models = ReadModelSettings(stack=settings, schema_name=chaos_schema(settings))
    result = await verify(read_models, processes=1)
    assert result.differences == [], result.differences[:5]


def unfinished(load: Load, views: list[dict[str, Any]], events: list[Event], killed_at: float) -> str:
    """What each command that did not end well went through: its call, its statuses, its facts."""
    lines = []
    for command, view in zip(load.sent, views, strict=True):
        if view["status"] in {"converged", "superseded"}:
            continue
        sent_s, answer_s = command.sent - killed_at, command.answered - command.sent
        steps = ", ".join(f"{step['status']} {step['at']}" for step in view.get("history", []))
        lines.append(
            f"{command.command_id} on {command.device_id}: sent {sent_s:+.2f} s from the kill, "
            f"202 after {answer_s:.2f} s ({command.attempts} calls), {view['status']}: {steps}"
        )
        lines.extend(
            f"  v{e.version} {e.type} recorded {e.recorded_at.isoformat()}"
            for e in events
            if str(getattr(getattr(e, "payload", None), "command_id", "")) == command.command_id
        )
    return "\n".join(lines)


def measured(
    load: Load,
    views: list[dict[str, Any]],
    times: dict[str, float],
    victim: int,
    controller: int,
    led: Counter[int],
) -> dict[str, Any]:
    """Recovery time and the pause the kill caused, for the report (not asserted: they are timings)."""
    answer_ms = [(c.answered - c.sent) * 1000 for c in load.sent]
    steady = [ms for c, ms in zip(load.sent, answer_ms, strict=True) if c.sent < times["killed"] - 1]
    gaps = sorted(c.answered for c in load.sent)
    converged = [datetime_gap(v["history"]) for v in views if v["status"] == "converged" and v.get("history")]
    return {
        "killed_node": victim,
        "was_controller": victim == controller,
        "journal_and_inbox_partitions_led": led[victim],
        "commands": len(load.sent),
        "call_errors_retried": dict(load.errors),
        "statuses": dict(Counter(v["status"] for v in views)),
        "down_s": round(times["restarted"] - times["killed"], 2),
        "restart_to_answering_s": round(times["answering"] - times["restarted"], 2),
        "answering_to_back_in_isr_s": round(times["in_isr"] - times["answering"], 2),
        "kill_to_back_in_isr_s": round(times["in_isr"] - times["killed"], 2),
        "steady_202_p50_ms": round(statistics.median(steady), 1) if steady else None,
        "slowest_202_ms": round(max(answer_ms), 1),
        "longest_gap_between_202s_s": round(max(b - a for a, b in itertools.pairwise(gaps)), 2),
        "slowest_pending_to_converged_s": round(max(converged), 2) if converged else None,
    }


def datetime_gap(history: list[dict[str, Any]]) -> float:
    """Seconds from a command's first status to its last (pending to converged)."""
    at = [datetime.fromisoformat(step["at"]) for step in history]
    return (at[-1] - at[0]).total_seconds()
