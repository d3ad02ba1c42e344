"""``hearth bench gateway``: the device gateway (issue #10) measured on temporary servers.

One stack: Kafka, Mosquitto, the broker-access follower, ONE device-gateway process and one device-actor
worker (no databases). The bench registers its devices through the inbox (``register_device`` and, for
the connection test, ``issue_credentials`` with a fresh secret's hash: the path the command API takes),
so the actor records the facts and the follower gives the broker their credentials.

1. **Reports/s, and the floor.** A publisher process (``mqtt_load publish``: gmqtt through ``MqttLink``,
   QoS 1, ``PUBLISHERS`` connections) sends ``reports`` state reports of ``devices`` thermostats, each
   device's seq 1, 2, 3 ... with a changed reading every time, so each report is a state change and
   becomes one ``device.state_reported`` fact. The floor comes first, in the same run on the same broker:
   the same publisher sends the same payloads on ``hearth/floor00/<id>/state`` (a root of the same length
   that the gateway does not subscribe to) to a plain gmqtt subscriber in this process with the gateway's
   receive maximum and acknowledgement, which only counts. Then the reports go to
   ``hearth/devices/<id>/state``, and this process counts, as they arrive, the gateway's inbox records
   and the actor's facts. Rates run from the first arrival to the last.
2. **Connections held.** ``connections`` devices, each with its own credential, connect at once
   (``mqtt_load hold``: one gmqtt connection each, subscribed to its ``commands`` topic, its will set,
   ``online`` published retained); the gateway's and the broker's resident memory before and after,
   divided by the connections held. The open-files limit is raised to the hard limit in this process
   (``resource.setrlimit``; the broker and the holder inherit it).
3. **Command round trip over MQTT**: ``hearth_bench.roundtrip`` (its stack's simulator plays the
   thermostats over MQTT through the broker and a gateway) at 200 commands/s, on a stack of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer

from hearth_bench.gateway_devices import hold_connections, register_devices, wait_credentials
from hearth_bench.gateway_figures import Arrivals
from hearth_bench.gateway_report import PUBLISHERS
from hearth_bench.load_client import cpu_share
from hearth_bench.mqtt_load import (
    FloorSubscriber,
    LoadProcess,
    Profiler,
    own_cpu_seconds,
    raise_open_files_limit,
)
from hearth_bench.options import option
from hearth_bench.stack import BenchStack, bench_stack, console, counting_progress
from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.schema.credentials import new_secret
from hearth_shared.schema.events import utcnow
from hearth_shared.schema.mqtt import GATEWAY_ACCOUNT

FLOOR_ROOT = "hearth/floor00"  # as long as "hearth/devices": the same bytes on the wire
DEVICE_ROOT = "hearth/devices"
RECEIVE_MAXIMUM = 20_000  # the gateway's default (DeviceGatewaySettings.receive_maximum)
STALL_S = 30.0  # give up waiting when nothing more arrived for this long
STATE_FACT = b'"type":"device.state_reported"'
REPORT_REQUEST = b'"kind":"report_state"'


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


async def _until(what: str, arrivals: list[Arrivals], expected: int, stack: BenchStack | None) -> None:
    """Wait until the last of ``arrivals`` counted ``expected`` (or nothing came for ``STALL_S``)."""
    with counting_progress() as progress:
        tasks = [progress.add_task(f"{what} [{i}]", total=expected) for i in range(len(arrivals))]
        seen, quiet_since = -1, time.monotonic()
        while arrivals[-1].count < expected:
            for task, a in zip(tasks, arrivals, strict=True):
                progress.update(task, completed=a.count)
            if arrivals[-1].count != seen:
                seen, quiet_since = arrivals[-1].count, time.monotonic()
            elif time.monotonic() - quiet_since > STALL_S:
                console.print(f"[red]{what}: {seen} of {expected}, nothing more for {STALL_S:g} s[/]")
                return
            if stack is not None:
                stack.check_running()
            await asyncio.sleep(0.25)
        for task, a in zip(tasks, arrivals, strict=True):
            progress.update(task, completed=a.count)


def _publish_job(stack: BenchStack, ids: list[str], reports: int, root: str, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "host": "127.0.0.1",
        "port": stack.services.mqtt_platform_port,
        "username": GATEWAY_ACCOUNT,
        "password": stack.services.mqtt_password,
        "root": root,
        "device_ids": ids,
        "reports": reports,
        "connections": PUBLISHERS,
        "at": utcnow().isoformat(),
    }


async def _publish(job: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Run a publisher process: its answer, and the CPU seconds it used while publishing."""
    publisher = LoadProcess("publish", job)
    try:
        if (line := await publisher.line()) != "ready":
            raise RuntimeError(f"publisher: {line}")
        cpu = publisher.cpu_seconds()
        publisher.say("go")
        answer = json.loads(await publisher.line())
        return answer, publisher.cpu_seconds() - cpu
    finally:
        publisher.close()


async def _floor(stack: BenchStack, ids: list[str], reports: int) -> dict[str, Any]:
    subscriber = FloorSubscriber(
        host="127.0.0.1",
        port=stack.services.mqtt_platform_port,
        username=GATEWAY_ACCOUNT,
        password=stack.services.mqtt_password,
        receive_maximum=RECEIVE_MAXIMUM,
    )
    await subscriber.start(FLOOR_ROOT)
    try:
        console.print(f"floor: {reports:,} reports published and subscribed with gmqtt, no gateway")
        job = _publish_job(stack, ids, reports, FLOOR_ROOT, "floor")
        cpu_before = own_cpu_seconds()
        (published, _), _ = await asyncio.gather(
            _publish(job), _until("floor subscriber", [subscriber.arrivals], reports, None)
        )
        subscriber_cpu = own_cpu_seconds() - cpu_before
    finally:
        await subscriber.stop()
    a = subscriber.arrivals
    return {
        "received": a.count,
        "seconds": round(a.seconds, 3),
        "rate": round(a.rate),
        "publisher": published,
        "subscriber_us_per_message": round(subscriber_cpu / max(1, a.count) * 1e6, 1),
    }


async def _through_gateway(
    stack: BenchStack, ids: list[str], reports: int, profile: Path | None
) -> dict[str, Any]:
    topics = stack.settings.topics
    inbox = TopicCounter(stack, topics.inbox, REPORT_REQUEST)
    journal = TopicCounter(stack, topics.journal, STATE_FACT)
    await inbox.start()
    await journal.start()
    try:
        console.print(f"gateway: {reports:,} reports through one gateway process into the journal")
        spy = Profiler(stack.pid("device-gateway"), profile) if profile else None
        cpu_before, began = stack.cpu_seconds(), time.monotonic()
        (published, publisher_cpu), _ = await asyncio.gather(
            _publish(_publish_job(stack, ids, reports, DEVICE_ROOT, "gateway")),
            _until("inbox, journal", [inbox.arrivals, journal.arrivals], reports, stack),
        )
        seconds = time.monotonic() - began
        cpu_after = stack.cpu_seconds()
        cpu = cpu_share(cpu_before, cpu_after, seconds)
        cpu["publisher process"] = round(publisher_cpu / seconds * 100)
        gateway_cpu = cpu_after["device-gateway"] - cpu_before["device-gateway"]
    finally:
        await inbox.stop()
        await journal.stop()
    figures: dict[str, Any] = {}
    for name, a in (("inbox", inbox.arrivals), ("journal", journal.arrivals)):
        figures[name] = {"received": a.count, "seconds": round(a.seconds, 3), "rate": round(a.rate)}
    if spy is not None:
        figures["profile_top"] = spy.stop()
    return {
        **figures,
        "publisher": published,
        "cpu_percent_of_one_core": cpu,
        "gateway_us_per_report": round(gateway_cpu / reports * 1e6, 1),
        "gateway_reports_per_cpu_second": round(reports / gateway_cpu) if gateway_cpu > 0 else 0,
    }


def run_gateway_bench(
    *, devices: int, reports: int, connections: int, profile: Path | None
) -> dict[str, Any]:
    open_files = raise_open_files_limit()
    thermostats = [f"gwbench-thermo-{i:05d}" for i in range(devices)]
    held = [(f"gwbench-conn-{i:05d}", new_secret()) for i in range(connections)]
    with bench_stack("gateway", services=("device-actor",), databases=False, mqtt=True) as stack:

        async def main() -> dict[str, Any]:
            console.print(f"registering {devices:,} thermostats and {connections:,} devices with credentials")
            await register_devices(stack, thermostats, held)
            await wait_credentials(stack, held)
            # Connections first: the broker's memory is then not what the reports' queues left behind.
            hold = await hold_connections(stack, held) if connections else {}
            floor = await _floor(stack, thermostats, reports)
            gateway = await _through_gateway(stack, thermostats, reports, profile)
            return {"floor": floor, "gateway": gateway, "connections": hold}

        figures = asyncio.run(main())
    # The load while it ran (1, 5, 15 min), other people's work included.
    return {"open_files_limit": open_files, "load_average": list(os.getloadavg()), **figures}


@dataclass(frozen=True)
class GatewayBench:
    """Device gateway: reports/s into the journal against gmqtt's own floor, connections held, round trip."""

    devices: int = option(1000, "Thermostats whose reports go through the gateway")
    reports: int = option(100_000, "State reports published (floor and gateway each)")
    connections: int = option(10_000, "Devices connected at once, each with its own credentials (0: skip)")
    roundtrip: bool = option(True, "Also the command round trip over MQTT at 200/s")
    duration_s: float = option(20.0, "Seconds of commands for the round trip", flag="--duration")
    profile: Path | None = option(None, "py-spy profile of the gateway while it runs (collapsed stacks)")


def main(params: GatewayBench) -> dict[str, Any]:
    from hearth_bench.gateway_report import gateway_result
    from hearth_bench.results import write_result
    from hearth_bench.roundtrip import run_roundtrip_bench

    figures = run_gateway_bench(
        devices=params.devices, reports=params.reports, connections=params.connections, profile=params.profile
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
