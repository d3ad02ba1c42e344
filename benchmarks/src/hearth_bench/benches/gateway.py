"""``hearth bench gateway``: the device gateway (issue #10, #21) measured on temporary servers.

One stack: Kafka, Mosquitto, the broker-access follower, one device-gateway process (or ``gateways``) and
one device-actor worker (no databases). The bench registers its devices through the inbox
(``register_device`` and, for the connection test, ``issue_credentials`` with a fresh secret's hash: the
path the command API takes), so the actor records the facts and the follower gives the broker their
credentials.

1. **The broker's floor, apart.** ``publishers`` publisher processes (``mqtt_load publish``: packets built
   before the run, written a window at a time, a few microseconds of CPU per message) send ``reports``
   state reports of ``devices`` thermostats at QoS 1, each device's seq 1, 2, 3 ... with a changed
   reading every time, on ``hearth/floor00/<id>/state`` (a root of the same length that the gateway does
   not subscribe to), to one subscriber process that only counts (``mqtt_load count``: PUBACKs written a
   read at a time, with the gateway's receive maximum). Every process's CPU share is measured over the
   run (the broker's, each publisher's, the counter's): the floor is the broker's when it is the one
   near a whole core, and the publishers' shares show that they were not the limit.
2. **Through the gateway.** The same publishers send the same reports to ``hearth/devices/<id>/state``;
   the device actor is stopped meanwhile (on 2 cores it would take the gateway's CPU to fold a backlog it
   cannot keep up with), and the bench counts the telemetry lane's records from its end offsets (nothing
   else writes there; no consumer in this process). Then the actor starts again and folds the backlog:
   facts/s into the journal, counted as they arrive (``device.state_reported`` only). Rates run from the
   first arrival to the last. With ``profile``, py-spy records the gateway meanwhile. With ``gateways``
   n > 1, n gateway processes run as device slices (``HEARTH_DEVICE_GATEWAY_SLICES``: each subscribes to
   every device's topics and takes its slice's devices, hearth_device_gateway.service.slices), and their
   CPU is added up.
3. **Connections held.** ``connections`` devices, each with its own credential, connect at once
   (``mqtt_load hold``: one gmqtt connection each, subscribed to its ``commands`` topic, its will set,
   ``online`` published retained); the gateway's and the broker's resident memory before and after,
   divided by the connections held. The open-files limit is raised to the hard limit in this process
   (``resource.setrlimit``; the broker and the holder inherit it).
4. **Command round trip over MQTT**: ``hearth_bench.benches.roundtrip`` (its stack's simulator plays the
   thermostats over MQTT through the broker and a gateway) at 200 commands/s, on a stack of its own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from collections.abc import Awaitable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer

from hearth_bench.figures.gateway_figures import Arrivals
from hearth_bench.figures.gateway_report import CONNECTIONS_PER_PUBLISHER
from hearth_bench.harness.load_client import cpu_share
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import BenchStack, bench_stack, console, counting_progress
from hearth_bench.load.gateway_devices import Broker, hold_connections, register_devices, wait_credentials
from hearth_bench.load.mqtt_load import LoadProcess, Profiler, raise_open_files_limit
from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.schema.credentials import new_secret
from hearth_shared.schema.events import utcnow
from hearth_shared.schema.mqtt import GATEWAY_ACCOUNT

FLOOR_ROOT = "hearth/floor00"  # as long as "hearth/devices": the same bytes on the wire
DEVICE_ROOT = "hearth/devices"
RECEIVE_MAXIMUM = 20_000  # the gateway's default (DeviceGatewaySettings.receive_maximum)
STALL_S = 30.0  # give up waiting when nothing more arrived for this long
ACTOR_START_S = 120.0  # the same, while the device actor starts again (restores its table, rejoins)
STATE_FACT = b'"type":"device.state_reported"'
ACTOR = "device-actor"
GATEWAY = "device-gateway"
T = TypeVar("T")


class TopicCounter:
    """Counts the records of a topic holding ``marker`` in their first bytes, from its end offsets as
    they are when ``start`` returns, as they arrive."""

    def __init__(self, stack: BenchStack, topic: str, marker: bytes) -> None:
        self.settings, self.topic, self.marker = stack.settings, topic, marker
        self.arrivals = Arrivals()
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.kafka_bootstrap_servers,
            enable_auto_commit=False,
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        tps = await topic_partitions(self.consumer, self.topic)
        self.consumer.assign(tps)
        await self.consumer.seek_to_end(*tps)
        for tp in tps:
            await self.consumer.position(tp)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=200, max_records=20_000)
            now = time.time()
            got = sum(
                1 for records in batch.values() for r in records if self.marker in (r.value or b"")[:40]
            )
            self.arrivals.add(got, now)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()


class OffsetCounter:
    """Counts the records written to a topic from its end offsets (polled every ``POLL_S``): no records
    are read, so counting costs the machine next to nothing. Only for a topic nothing else writes to
    meanwhile."""

    POLL_S = 0.05

    def __init__(self, stack: BenchStack, topic: str) -> None:
        self.topic = topic
        self.arrivals = Arrivals()
        self.consumer = AIOKafkaConsumer(bootstrap_servers=stack.settings.kafka_bootstrap_servers)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        tps = await topic_partitions(self.consumer, self.topic)
        counted = sum((await self.consumer.end_offsets(tps)).values())
        self._task = asyncio.create_task(self._run(tps, counted))

    async def _run(self, tps: list[Any], counted: int) -> None:
        while True:
            await asyncio.sleep(self.POLL_S)
            now = sum((await self.consumer.end_offsets(tps)).values())
            self.arrivals.add(now - counted, time.time())
            counted = now

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()


async def _until(
    what: str,
    arrivals: list[Arrivals],
    expected: int,
    stack: BenchStack | None,
    *,
    stopped: str = "",
    stall_s: float = STALL_S,
    first_s: float = STALL_S,
) -> None:
    """Wait until the last of ``arrivals`` counted ``expected`` (or nothing came for ``first_s`` at
    first, for ``stall_s`` once something came); ``stopped``: a part of the stack meant not to run."""
    with counting_progress() as progress:
        tasks = [progress.add_task(f"{what} [{i}]", total=expected) for i in range(len(arrivals))]
        seen, quiet_since = -1, time.monotonic()
        while arrivals[-1].count < expected:
            for task, a in zip(tasks, arrivals, strict=True):
                progress.update(task, completed=a.count)
            if arrivals[-1].count != seen:
                seen, quiet_since = arrivals[-1].count, time.monotonic()
            elif time.monotonic() - quiet_since > (stall_s if seen > 0 else first_s):
                console.print(f"[red]{what}: {seen} of {expected}, nothing more for a while[/]")
                return
            if stack is not None:
                stack.check_running(but=stopped)
            await asyncio.sleep(0.25)
        for task, a in zip(tasks, arrivals, strict=True):
            progress.update(task, completed=a.count)


def _publish_jobs(
    stack: BenchStack, ids: list[str], reports: int, root: str, name: str, publishers: int
) -> list[dict[str, Any]]:
    """One job per publisher process: device ``d`` (and so its reports, in order) in process ``d % n``."""
    per_device = reports // len(ids)
    jobs = []
    for p in range(publishers):
        mine = ids[p::publishers]
        jobs.append(
            {
                "name": f"{name}-{p}",
                "host": "127.0.0.1",
                "port": stack.services.mqtt_platform_port,
                "username": GATEWAY_ACCOUNT,
                "password": stack.services.mqtt_password,
                "root": root,
                "device_ids": mine,
                "reports": per_device * len(mine),
                "connections": CONNECTIONS_PER_PUBLISHER,
                "at": utcnow().isoformat(),
            }
        )
    return jobs


async def _started(command: str, job: dict[str, Any]) -> LoadProcess:
    process = LoadProcess(command, job)
    if (line := await process.line()) != "ready":
        process.close()
        raise RuntimeError(f"{command}: {line}")
    return process


async def _load(
    stack: BenchStack, jobs: list[dict[str, Any]], done: Awaitable[T], watched: dict[str, LoadProcess]
) -> tuple[T, dict[str, Any], dict[str, float]]:
    """Run the publisher processes of ``jobs`` until they and ``done`` finished: what ``done`` gave, what
    the publishers did (``_generator``), and every process's CPU share over the run in % of one core
    (the stack's parts, each publisher, the ``watched`` processes, the machine and ``others``)."""
    publishers = [await _started("publish", job) for job in jobs]
    processes = {**watched, **{f"publisher {i + 1}": p for i, p in enumerate(publishers)}}

    def cpu() -> dict[str, float]:
        return stack.cpu_seconds() | {name: p.cpu_seconds() for name, p in processes.items()}

    try:
        before, began = cpu(), time.monotonic()
        for publisher in publishers:
            publisher.say("go")
        answers, result = await asyncio.gather(asyncio.gather(*(p.line() for p in publishers)), done)
        share = cpu_share(before, cpu(), time.monotonic() - began)
    finally:
        for publisher in publishers:
            publisher.close()
    return result, _generator([json.loads(a) for a in answers]), share


def _generator(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """What the publishers did: messages, and their rate from the first write to the last PUBACK."""
    began = min(a["started"] for a in answers)
    ended = max(a["acknowledged"] for a in answers)
    published = sum(a["published"] for a in answers)
    rate = published / (ended - began) if ended > began else 0.0
    return {"published": published, "seconds": round(ended - began, 3), "rate": round(rate)}


def _figures(a: Arrivals) -> dict[str, Any]:
    return {"received": a.count, "seconds": round(a.seconds, 3), "rate": round(a.rate)}


async def _floor(stack: BenchStack, ids: list[str], reports: int, publishers: int) -> dict[str, Any]:
    jobs = _publish_jobs(stack, ids, reports, FLOOR_ROOT, "floor", publishers)
    expected = sum(job["reports"] for job in jobs)
    quiet_after_s = await stack.quiet()  # the connections' registrations and `online`s folded
    counter = await _started(
        "count",
        {
            "host": "127.0.0.1",
            "port": stack.services.mqtt_platform_port,
            "username": GATEWAY_ACCOUNT,
            "password": stack.services.mqtt_password,
            "filter": f"$share/bench-floor/{FLOOR_ROOT}/+/state",
            "receive_maximum": RECEIVE_MAXIMUM,
            "expected": expected,
            "stall_s": STALL_S,
        },
    )
    try:
        console.print(f"floor: {expected:,} reports from {publishers} publisher processes to one counter")
        line, generator, cpu = await _load(stack, jobs, counter.line(), {"counter": counter})
    finally:
        counter.close()
    counted = json.loads(line)
    a = Arrivals(counted["received"], counted["first"], counted["last"], counted["first_batch"])
    return {
        **_figures(a),
        "publishers": generator,
        "cpu_percent_of_one_core": cpu,
        "quiet_after_s": quiet_after_s,
    }


def _more_gateways(stack: BenchStack, gateways: int) -> list[str]:
    """Start gateways 2 .. ``gateways`` (slices 1 .. n - 1) beside the stack's own (slice 0, started with
    ``SLICES`` in the stack's environment); their part names, all of them now in ``stack.parts``."""
    names = []
    for index in range(1, gateways):
        name = f"{GATEWAY}-{index + 1}"
        env = {
            "HEARTH_DEVICE_GATEWAY_INSTANCE": f"gateway-{index + 1}",
            "HEARTH_DEVICE_GATEWAY_SLICE": str(index),
        }
        services = dataclasses.replace(
            stack.services, logs=stack.services.logs / name, extra_env={**stack.services.extra_env, **env}
        )
        process, timeout_s = services.part(GATEWAY)
        process = dataclasses.replace(process, name=name)
        stack.parts[name] = process  # stopped with the stack
        process.start()
        process.wait_healthy(timeout_s)
        names.append(name)
    return names


async def _through_gateway(
    stack: BenchStack, ids: list[str], reports: int, publishers: int, profile: Path | None
) -> dict[str, Any]:
    topics = stack.settings.topics
    jobs = _publish_jobs(stack, ids, reports, DEVICE_ROOT, "gateway", publishers)
    expected = sum(job["reports"] for job in jobs)
    actor = stack.parts[ACTOR]
    actor.stop()  # see the module: the gateway alone first, then the actor folds what it wrote
    quiet_after_s = await stack.quiet(but=ACTOR)
    inbox = OffsetCounter(stack, topics.inbox)
    journal = TopicCounter(stack, topics.journal, STATE_FACT)
    await inbox.start()
    await journal.start()
    top: dict[str, list[tuple[str, float]]] | None = None
    try:
        gateways = [name for name in stack.parts if name.startswith(GATEWAY)]
        console.print(
            f"gateway: {expected:,} reports through {len(gateways)} gateway process(es), actor stopped"
        )
        spy = Profiler(stack.pid(GATEWAY), profile) if profile else None

        def gateway_cpu() -> float:
            used = stack.cpu_seconds()
            return sum(used[name] for name in gateways)

        cpu_before = gateway_cpu()
        wait = _until("inbox", [inbox.arrivals], expected, stack, stopped=ACTOR)
        _, generator, cpu = await _load(stack, jobs, wait, {})
        used = gateway_cpu() - cpu_before
        top = spy.stop() if spy is not None else None
        console.print("the device actor starts again and folds the reports into the journal")
        actor.start()
        # A backlog is coalesced (latest wins within a batch: fewer facts than reports), so the facts
        # end when nothing more comes for a few seconds.
        await _until("journal", [journal.arrivals], expected, stack, first_s=ACTOR_START_S, stall_s=5.0)
    finally:
        await inbox.stop()
        await journal.stop()
    folded = journal.arrivals
    figures: dict[str, Any] = {
        "inbox": _figures(inbox.arrivals),
        "journal": _figures(folded)
        | {"reports_folded_per_s": round(expected / folded.seconds) if folded.seconds > 0 else 0},
    }
    if top is not None:
        figures["profile_top"] = top
    return {
        **figures,
        "publishers": generator,
        "cpu_percent_of_one_core": cpu,
        "gateways": len(gateways),
        "quiet_after_s": quiet_after_s,
        "gateway_us_per_report": round(used / max(1, inbox.arrivals.count) * 1e6, 1),
        "gateway_reports_per_cpu_second": round(inbox.arrivals.count / used) if used > 0 else 0,
    }


def run_gateway_bench(
    *, devices: int, reports: int, publishers: int, gateways: int, connections: int, profile: Path | None
) -> dict[str, Any]:
    open_files = raise_open_files_limit()
    thermostats = [f"gwbench-thermo-{i:05d}" for i in range(devices)]
    held = [(f"gwbench-conn-{i:05d}", new_secret()) for i in range(connections)]
    sliced = {"HEARTH_DEVICE_GATEWAY_SLICES": str(gateways)} if gateways > 1 else {}
    with bench_stack("gateway", services=(ACTOR,), databases=False, mqtt=True, env=sliced) as stack:
        _more_gateways(stack, gateways)

        async def main() -> dict[str, Any]:
            console.print(f"registering {devices:,} thermostats and {connections:,} devices with credentials")
            await register_devices(stack, thermostats, held)
            await wait_credentials(stack, held)
            # Connections first: the broker's memory is then not what the reports' queues left behind.
            broker = Broker.all_of(stack)[0]
            parts = {GATEWAY: broker, broker.part: broker}
            hold = await hold_connections(stack, {broker: held}, parts) if connections else {}
            floor = await _floor(stack, thermostats, reports, publishers)
            gateway = await _through_gateway(stack, thermostats, reports, publishers, profile)
            return {"floor": floor, "gateway": gateway, "connections": hold}

        figures = asyncio.run(main())
    # The load while it ran (1, 5, 15 min), other people's work included.
    return {"open_files_limit": open_files, "load_average": list(os.getloadavg()), **figures}


@dataclass(frozen=True)
class GatewayBench:
    """Device gateway: reports/s against the broker's own floor (measured apart), connections, round trip."""

    devices: int = option(1000, "Thermostats whose reports go through the gateway")
    reports: int = option(200_000, "State reports published (floor and gateway each)")
    publishers: int = option(2, "Publisher processes (each with 4 connections; a device's reports in one)")
    gateways: int = option(1, "Gateway processes; more than 1: device slices (a device's messages in order)")
    connections: int = option(10_000, "Devices connected at once, each with its own credentials (0: skip)")
    roundtrip: bool = option(True, "Also the command round trip over MQTT at 200/s")
    duration_s: float = option(20.0, "Seconds of commands for the round trip", flag="--duration")
    profile: Path | None = option(None, "py-spy profile of the gateway while it runs (collapsed stacks)")


def main(params: GatewayBench) -> dict[str, Any]:
    from hearth_bench.benches.roundtrip import run_roundtrip_bench
    from hearth_bench.figures.gateway_report import gateway_result
    from hearth_bench.figures.results import write_result

    figures = run_gateway_bench(
        devices=params.devices,
        reports=params.reports,
        publishers=params.publishers,
        gateways=params.gateways,
        connections=params.connections,
        profile=params.profile,
    )
    for kind, frames in figures["gateway"].get("profile_top", {}).items():
        console.print(f"gateway profile, by {kind} time:")
        for frame, share in frames:
            console.print(f"  {share:6.1%}  {frame}")
    result = gateway_result(figures, devices=params.devices, reports=params.reports, roundtrip=None)
    path = write_result("gateway", result)  # kept even if the round trip fails
    if params.roundtrip:
        try:
            trip: dict[str, Any] = run_roundtrip_bench(
                devices=500, rates=[200.0], duration_s=params.duration_s, floor_s=5.0, telemetry_rate=0.1
            )
        except Exception as error:  # said in the result: the figures above stand on their own
            console.print(f"[red]round trip not measured: {error}[/]")
            trip = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
        result = gateway_result(figures, devices=params.devices, reports=params.reports, roundtrip=trip)
        path = write_result("gateway", result)
    for row in result["rows"]:
        console.print(row)
    console.print(f"written to {path}")
    return result
