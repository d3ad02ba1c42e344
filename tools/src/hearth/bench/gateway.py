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
3. **Command round trip over MQTT**: ``hearth.bench.roundtrip`` (its stack's simulator plays the
   thermostats over MQTT through the broker and a gateway) at 200 commands/s, on a stack of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from contextlib import suppress
from typing import Any

import psutil
from aiokafka import AIOKafkaConsumer

from hearth.bench.gateway_figures import Arrivals, per_connection_kib, ratio
from hearth.bench.mqtt_load import FloorSubscriber, raise_open_files_limit
from hearth.bench.stack import BenchStack, bench_stack, console, counting_progress, cpu_share
from hearth_shared.credentials import hash_secret, new_credential_id, new_secret
from hearth_shared.events import IssueCredentials, RegisterDevice, encode, new_id, utcnow
from hearth_shared.kafka import make_producer, topic_partitions
from hearth_shared.mqtt import GATEWAY_ACCOUNT

HOME = "bench-gateway"
PUBLISHERS = 8  # publisher connections (the broker lets each have a few unacknowledged messages)
FLOOR_ROOT = "hearth/floor00"  # as long as "hearth/devices": the same bytes on the wire
DEVICE_ROOT = "hearth/devices"
RECEIVE_MAXIMUM = 20_000  # the gateway's default (DeviceGatewaySettings.receive_maximum)
STALL_S = 30.0  # give up waiting when nothing more arrived for this long
STATE_FACT = b'"type":"device.state_reported"'
REPORT_REQUEST = b'"kind":"report_state"'


class LoadProcess:
    """One ``python -m hearth.bench.mqtt_load`` process: a JSON job in, lines out."""

    def __init__(self, command: str, job: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hearth.bench.mqtt_load", command],
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


async def _register(stack: BenchStack, thermostats: list[str], devices: list[tuple[str, str]]) -> None:
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


async def _wait_credentials(stack: BenchStack, count: int, timeout_s: float = 300.0) -> None:
    """Until the broker's password file holds ``count`` device credentials (plus the service accounts)."""
    access_dir = stack.services.mqtt_access_dir
    assert access_dir is not None
    passwd = access_dir / "passwd"
    deadline = time.monotonic() + timeout_s
    with counting_progress() as progress:
        task = progress.add_task("credentials in the broker's password file", total=count)
        while True:
            lines = sum(1 for line in passwd.read_text().splitlines() if line and not line.startswith("_"))
            progress.update(task, completed=lines)
            if lines >= count:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{lines} of {count} credentials reached the broker in {timeout_s:g} s")
            stack.check_running()
            await asyncio.sleep(0.5)


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
        "port": stack.services.mqtt_port,
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
        port=stack.services.mqtt_port,
        username=GATEWAY_ACCOUNT,
        password=stack.services.mqtt_password,
        receive_maximum=RECEIVE_MAXIMUM,
    )
    await subscriber.start(FLOOR_ROOT)
    try:
        console.print(f"floor: {reports:,} reports published and subscribed with gmqtt, no gateway")
        job = _publish_job(stack, ids, reports, FLOOR_ROOT, "floor")
        (published, _), _ = await asyncio.gather(
            _publish(job), _until("floor subscriber", [subscriber.arrivals], reports, None)
        )
    finally:
        await subscriber.stop()
    a = subscriber.arrivals
    return {
        "received": a.count,
        "seconds": round(a.seconds, 3),
        "rate": round(a.rate),
        "publisher": published,
    }


async def _through_gateway(stack: BenchStack, ids: list[str], reports: int) -> dict[str, Any]:
    topics = stack.settings.topics
    inbox = TopicCounter(stack, topics.inbox, REPORT_REQUEST)
    journal = TopicCounter(stack, topics.journal, STATE_FACT)
    await inbox.start()
    await journal.start()
    try:
        console.print(f"gateway: {reports:,} reports through one gateway process into the journal")
        cpu_before, began = stack.cpu_seconds(), time.monotonic()
        (published, publisher_cpu), _ = await asyncio.gather(
            _publish(_publish_job(stack, ids, reports, DEVICE_ROOT, "gateway")),
            _until("inbox, journal", [inbox.arrivals, journal.arrivals], reports, stack),
        )
        seconds = time.monotonic() - began
        cpu = cpu_share(cpu_before, stack.cpu_seconds(), seconds)
        cpu["publisher process"] = round(publisher_cpu / seconds * 100)
    finally:
        await inbox.stop()
        await journal.stop()
    figures = {}
    for name, a in (("inbox", inbox.arrivals), ("journal", journal.arrivals)):
        figures[name] = {"received": a.count, "seconds": round(a.seconds, 3), "rate": round(a.rate)}
    return {**figures, "publisher": published, "cpu_percent_of_one_core": cpu}


def _rss(stack: BenchStack, name: str) -> int:
    return int(psutil.Process(stack.pid(name)).memory_info().rss)


async def _hold(stack: BenchStack, devices: list[tuple[str, str]]) -> dict[str, Any]:
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


def run_gateway_bench(*, devices: int, reports: int, connections: int) -> dict[str, Any]:
    open_files = raise_open_files_limit()
    thermostats = [f"gwbench-thermo-{i:05d}" for i in range(devices)]
    held = [(f"gwbench-conn-{i:05d}", new_secret()) for i in range(connections)]
    with bench_stack("gateway", services=("device-actor",), databases=False, mqtt=True) as stack:

        async def main() -> dict[str, Any]:
            console.print(f"registering {devices:,} thermostats and {connections:,} devices with credentials")
            await _register(stack, thermostats, held)
            await _wait_credentials(stack, connections)
            floor = await _floor(stack, thermostats, reports)
            gateway = await _through_gateway(stack, thermostats, reports)
            hold = await _hold(stack, held) if connections else {}
            return {"floor": floor, "gateway": gateway, "connections": hold}

        figures = asyncio.run(main())
    return {"open_files_limit": open_files, **figures}


def _result(
    figures: dict[str, Any], *, devices: int, reports: int, roundtrip: dict[str, Any] | None
) -> dict[str, Any]:
    floor, gw, hold = figures["floor"], figures["gateway"], figures["connections"]
    rows = [
        {
            "path": "floor: gmqtt publish -> gmqtt subscribe (QoS 1, same broker)",
            "msg/s": floor["rate"],
            "ratio": 1.0,
        },
        {
            "path": "MQTT report -> gateway -> inbox record",
            "msg/s": gw["inbox"]["rate"],
            "ratio": ratio(gw["inbox"]["rate"], floor["rate"]),
        },
        {
            "path": "MQTT report -> gateway -> actor -> journal fact",
            "msg/s": gw["journal"]["rate"],
            "ratio": ratio(gw["journal"]["rate"], floor["rate"]),
        },
    ]
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    notes = [
        f"{reports:,} state reports of {devices:,} thermostats (seq 1, 2, 3 ... per device, each a change), "
        f"published at QoS 1 by one process over {PUBLISHERS} gmqtt connections; one gateway process, one "
        f"device-actor worker, Kafka and Mosquitto on the same 2 cores; load average (1/5/15 min) {load} "
        "at the end, other engineers' work included. The floor: the same payloads through the same broker "
        "to one gmqtt subscriber that only counts, with the gateway's receive maximum and "
        f"acknowledgement. Counted: floor {floor['received']:,}, inbox {gw['inbox']['received']:,}, facts "
        f"{gw['journal']['received']:,} of {reports:,}. CPU while the reports ran, in % of one core: "
        + ", ".join(f"{k} {v}" for k, v in gw["cpu_percent_of_one_core"].items())
        + "."
    ]
    target = gw["inbox"]["rate"] >= 20_000 and gw["inbox"]["rate"] >= 0.5 * floor["rate"]
    notes.append(
        "Target (>= 20,000 reports/s per gateway process and >= 0.5 of the floor): "
        + ("met." if target else "not met here.")
    )
    if hold:
        kib = hold["kib_per_connection"]
        notes.append(
            f"Connections: {hold['held']:,} devices held at once, each with its own credential "
            f"({hold['failed']:,} failed; connecting took {hold['seconds']:.1f} s; open-files limit "
            f"{figures['open_files_limit']:,}, raised to the hard limit with setrlimit). Resident memory "
            f"per connection: broker {kib['mosquitto']:.1f} KiB, gateway {kib['device-gateway']:.2f} KiB "
            f"(the gateway holds one MQTT connection whatever the devices; RSS before/after: "
            f"{hold['rss_before_mb']}, {hold['rss_after_mb']} MB)."
        )
    if roundtrip:
        s = next((s for s in roundtrip["steps"] if s["rate_per_s"] == 200), roundtrip["steps"][-1])
        c = s["command_ms"]
        notes.append(
            f"Command round trip over MQTT (`hearth bench roundtrip`, simulator over Mosquitto and a "
            f"gateway) at {s['rate_per_s']:g}/s: p50 {c.get('p50')} ms, p99 {c.get('p99')} ms, "
            f"{s['converged_share']:.1%} converged; target p99 < 100 ms "
            + ("met." if c.get("p99", 1e9) < 100 else "not met.")
        )
        rows.append(
            {
                "path": f"command round trip at {s['rate_per_s']:g}/s, p99 ms",
                "msg/s": c.get("p99"),
                "ratio": "",
            }
        )
    return {
        "title": "Device gateway (issue #10)",
        "devices": devices,
        "reports": reports,
        **figures,
        "roundtrip": roundtrip,
        "rows": rows,
        "notes": " ".join(notes),
    }


def main(
    *, devices: int, reports: int, connections: int, roundtrip: bool, duration_s: float
) -> dict[str, Any]:
    from hearth.bench.results import write_result
    from hearth.bench.roundtrip import run_roundtrip_bench

    figures = run_gateway_bench(devices=devices, reports=reports, connections=connections)
    trip = None
    if roundtrip:
        trip = run_roundtrip_bench(
            devices=500, rates=[200.0], duration_s=duration_s, floor_s=5.0, telemetry_rate=0.1
        )
    result = _result(figures, devices=devices, reports=reports, roundtrip=trip)
    path = write_result("gateway", result)
    for row in result["rows"]:
        console.print(row)
    console.print(f"written to {path}")
    return result
