"""Live push: a device report to the ``change`` message at each of ``clients`` websocket subscribers.

The stack runs on temporary servers (Kafka, PostgreSQL, Redis; the device actor, projector, query API
and command API as processes; no simulator). ``devices`` thermostats of one home are registered through
the command API and report once; then ``clients`` websockets (the ``websockets`` client library, in this
process, with its defaults: permessage-deflate offered, as browsers do, unless ``compression`` is off)
open ``WS /v1/subscribe?token=`` of the query API, send ``{"action": "subscribe", "home_id": H}`` and
read their snapshots. Then state reports of those devices go on the inbox at ``rate`` per second for
``duration_s`` (open loop), and each one's latency runs from when it was due to be sent until its
``change`` message (matched by the fact's ``causation_id``, the report's request id) arrives at each
client: inbox -> device actor -> journal -> projector (PostgreSQL, Redis PUBLISH) -> the query API's
hub -> each websocket. One report makes one change; every client should get every one.

The floor, in the same run: Redis PUBLISH -> ``clients`` subscribers, each its own connection held by
this process (redis-py asyncio), the same number of messages at the same rate, each the size of a real
``change`` message: what fanning a message out to that many connections read by one Python process
costs without Hearth in the way.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from redis.asyncio import Redis
from websockets.asyncio.client import ClientConnection, connect

from hearth.bench.stack import BenchStack, bench_stack, console, cpu_share, latency_ms, latency_row, paced
from hearth_shared.events import ReportState, encode, new_id, utcnow
from hearth_shared.kafka import make_producer

HOME = "bench-push"
CONNECTING = 50  # websockets opening at once
DRAIN_S = 15.0  # how long after the last send the changes may take to arrive
CHANGE = '{"type":"change"'  # how a change message starts (as the projector encodes it)


class _Fact(msgspec.Struct):
    type: str
    causation_id: uuid.UUID | None = None


class _Message(msgspec.Struct):
    type: str
    event: _Fact | None = None


_message = msgspec.json.Decoder(_Message)


class Client:
    """One subscriber: its websocket and what arrived after its snapshots, with the loop's time."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.arrived: list[tuple[float, str | bytes]] = []  # decoded after the run, to keep reading cheap
        self.changes = 0  # (heartbeats come too)
        self.reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        loop = asyncio.get_running_loop()
        async for message in self.ws:
            self.arrived.append((loop.time(), message))
            self.changes += isinstance(message, str) and message.startswith(CHANGE)

    async def close(self) -> None:
        await self.ws.close()
        if self.reader is not None:
            await asyncio.gather(self.reader, return_exceptions=True)


async def _subscribe(url: str, devices: int, compression: bool) -> Client:
    ws = await connect(
        url, proxy=None, open_timeout=60, max_queue=None, compression="deflate" if compression else None
    )
    await ws.send(msgspec.json.encode({"action": "subscribe", "home_id": HOME}).decode())
    snapshots = 0
    while snapshots < devices:
        if _message.decode(await ws.recv()).type == "snapshot":
            snapshots += 1
    client = Client(ws)
    client.reader = asyncio.create_task(client.read())
    return client


class Reporter:
    """Puts state reports of the devices on the inbox, as their gateway would, each device's seq rising."""

    def __init__(self, stack: BenchStack, device_ids: list[str]) -> None:
        self.topic = stack.settings.topics.inbox
        self.producer = make_producer(stack.settings.kafka_bootstrap_servers, "bench-push")
        self.device_ids = device_ids
        self.seq = dict.fromkeys(device_ids, 0)
        self.rng = random.Random(7)

    async def paced(self, rate: float, duration_s: float) -> tuple[dict[uuid.UUID, float], float]:
        """Reports at ``rate`` for ``duration_s``, round robin; when each was due (loop time, by request
        id), and how late the latest started."""
        due_at: dict[uuid.UUID, float] = {}
        sent: list[asyncio.Future[Any]] = []

        async def report(i: int, due: float) -> None:
            device_id = self.device_ids[i % len(self.device_ids)]
            self.seq[device_id] += 1
            now = utcnow()
            reading = {
                "ambient_c": round(self.rng.uniform(18, 24), 1),
                "humidity_pct": round(self.rng.uniform(35, 55), 1),
            }
            request = ReportState(
                request_id=new_id(),
                device_id=device_id,
                sent_at=now,
                device_seq=self.seq[device_id],
                device_time=now,
                state=reading,
            )
            due_at[request.request_id] = due
            sent.append(await self.producer.send(self.topic, encode(request), key=device_id.encode()))

        late = await paced(rate, duration_s, report)
        await asyncio.gather(*sent)
        return due_at, late


def _deliveries(
    clients: list[Client], due_at: dict[uuid.UUID, float]
) -> tuple[dict[uuid.UUID, list[float]], str | bytes | None]:
    """The latency of each delivery of each report's change, by report; and one change message."""
    latencies: dict[uuid.UUID, list[float]] = {request_id: [] for request_id in due_at}
    sample = None
    for client in clients:
        for at, text in client.arrived:
            message = _message.decode(text)
            if message.type != "change" or message.event is None:
                continue
            request_id = message.event.causation_id
            if request_id in latencies and message.event.type == "device.state_reported":
                latencies[request_id].append(at - due_at[request_id])
                sample = text
    return latencies, sample


async def _wait_for(done: Callable[[], bool], timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        if done() or loop.time() >= deadline:
            return
        await asyncio.sleep(0.1)


async def _gated(n: int, limit: int, open_one: Callable[[int], Awaitable[Client]]) -> list[Client]:
    gate = asyncio.Semaphore(limit)

    async def one(i: int) -> Client:
        async with gate:
            return await open_one(i)

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def _redis_floor(
    redis_url: str, subscribers: int, rate: float, duration_s: float, payload: bytes
) -> tuple[list[float], int]:
    """PUBLISH -> ``subscribers`` connections, each message ``payload``-sized; latencies and misses."""
    loop = asyncio.get_running_loop()
    channel = f"bench-floor-{uuid.uuid4().hex[:6]}"
    publisher = Redis.from_url(redis_url)
    connections = [Redis.from_url(redis_url) for _ in range(subscribers)]
    pubsubs = [c.pubsub(ignore_subscribe_messages=True) for c in connections]
    due_at: dict[int, float] = {}
    latencies: list[float] = []

    async def listen(pubsub: Any) -> None:
        while True:
            message = await pubsub.get_message(timeout=None)
            if message is not None:
                latencies.append(loop.time() - due_at[int(message["data"][:8])])

    tasks = []
    try:
        for pubsub in pubsubs:
            await pubsub.subscribe(channel)
            tasks.append(asyncio.create_task(listen(pubsub)))
        while True:  # every SUBSCRIBE confirmed
            if (await publisher.pubsub_numsub(channel))[0][1] >= subscribers:
                break
            await asyncio.sleep(0.1)

        async def publish(i: int, due: float) -> None:
            due_at[i] = due
            await publisher.publish(channel, b"%08d" % i + payload[8:])

        n = round(rate * duration_s)
        await paced(rate, duration_s, publish)
        await _wait_for(lambda: len(latencies) >= n * subscribers, DRAIN_S)
        return list(latencies), n * subscribers - len(latencies)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for pubsub, connection in zip(pubsubs, connections, strict=True):
            await pubsub.aclose()
            await connection.aclose()
        await publisher.aclose()


async def _measure(
    stack: BenchStack, *, clients: int, devices: int, rate: float, duration_s: float, compression: bool
) -> dict[str, Any]:
    device_ids = await stack.register_thermostats(HOME, devices)
    await stack.wait_listed(HOME, devices, online=False)
    reporter = Reporter(stack, device_ids)
    await reporter.producer.start()
    try:
        return await _measure_with(
            stack,
            reporter,
            clients=clients,
            devices=devices,
            rate=rate,
            duration_s=duration_s,
            compression=compression,
        )
    finally:
        await reporter.producer.stop()


async def _measure_with(
    stack: BenchStack,
    reporter: Reporter,
    *,
    clients: int,
    devices: int,
    rate: float,
    duration_s: float,
    compression: bool,
) -> dict[str, Any]:
    # One report per device first: all are online, and no `device.came_online` comes in the measurement.
    await reporter.paced(rate=100.0, duration_s=devices / 100.0)
    await stack.wait_listed(HOME, devices, online=True)
    url = stack.query_api.replace("http://", "ws://") + f"/v1/subscribe?token={stack.token(HOME)}"
    console.print(f"opening {clients} websockets ({CONNECTING} at a time), each subscribed to {HOME}")
    loop = asyncio.get_running_loop()
    began = loop.time()
    subscribers = await _gated(clients, CONNECTING, lambda i: _subscribe(url, devices, compression))
    connect_s = loop.time() - began
    try:
        console.print(f"reports: {rate:g}/s for {duration_s:g} s, over {devices} thermostats")
        cpu_before, began = stack.cpu_seconds(), loop.time()
        due_at, late = await reporter.paced(rate, duration_s)
        expected = len(due_at)
        await _wait_for(lambda: all(c.changes >= expected for c in subscribers), DRAIN_S)
        cpu = cpu_share(cpu_before, stack.cpu_seconds(), loop.time() - began)
        stack.check_running()
    finally:
        await asyncio.gather(*(client.close() for client in subscribers))
    by_report, sample = _deliveries(subscribers, due_at)
    if sample is None:
        raise RuntimeError("no change message arrived at any client")
    payload = sample.encode() if isinstance(sample, str) else sample
    console.print(f"floor: Redis PUBLISH to {clients} subscribers, {rate:g}/s for {duration_s:g} s")
    floor, floor_missing = await _redis_floor(stack.settings.redis_url, clients, rate, duration_s, payload)
    return {
        "latencies": [latency for report in by_report.values() for latency in report],
        "first": [min(report) for report in by_report.values() if report],
        "spread": [max(report) - min(report) for report in by_report.values() if report],
        "missing": expected * clients - sum(map(len, by_report.values())),
        "late": late,
        "cpu": cpu,
        "connect_s": connect_s,
        "message_bytes": len(payload),
        "floor": floor,
        "floor_missing": floor_missing,
        "reports": expected,
    }


def run_push_bench(
    *, clients: int, devices: int, rate: float, duration_s: float, compression: bool = True
) -> dict[str, Any]:
    services = ("device-actor", "projector", "query-api", "command-api")
    with bench_stack("push", services=services) as stack:
        seen = asyncio.run(
            _measure(
                stack,
                clients=clients,
                devices=devices,
                rate=rate,
                duration_s=duration_s,
                compression=compression,
            )
        )
    push = latency_ms(seen["latencies"])
    floor = latency_ms(seen["floor"])
    first, spread = latency_ms(seen["first"]), latency_ms(seen["spread"])
    deliveries = seen["reports"] * clients
    return {
        "title": f"live push: report -> change message at {clients:,} websocket subscribers",
        "clients": clients,
        "compression": "permessage-deflate" if compression else "none",
        "devices": devices,
        "rate_per_s": rate,
        "duration_s": duration_s,
        "reports": seen["reports"],
        "deliveries_expected": deliveries,
        "deliveries_missing": seen["missing"],
        "push_ms": push,
        "first_client_ms": first,
        "spread_ms": spread,
        "floor_redis_pubsub_ms": floor,
        "floor_missing": seen["floor_missing"],
        "message_bytes": seen["message_bytes"],
        "connect_s": round(seen["connect_s"], 1),
        "latest_start_s": round(seen["late"], 3),
        "cpu_percent_of_one_core": seen["cpu"],
        "rows": [
            latency_row(f"Redis PUBLISH -> {clients:,} subscribers (floor)", floor),
            latency_row(f"inbox report -> `change` at {clients:,} websockets", push, floor),
            latency_row("  the first client to get each report's change", first, ratios=False),
            latency_row("  each report: last client's arrival - first's", spread, ratios=False),
        ],
        "notes": (
            f"{seen['reports']:,} state reports at {rate:g}/s for {duration_s:g} s over {devices} "
            f"thermostats of one home, put on the inbox (as the gateway does), each to be delivered to "
            f"{clients:,} websocket subscribers of that home (`WS /v1/subscribe?token=`, websockets "
            "library defaults, "
            + ("permessage-deflate offered as browsers do" if compression else "compression off")
            + ", all in this process): "
            f"{deliveries - seen['missing']:,} of {deliveries:,} deliveries arrived within "
            f"{DRAIN_S:g} s of the last send. Latency per delivery from when the report was due to be "
            "sent until its `change` (matched by the fact's `causation_id`) was read by that client. "
            f"Opening and subscribing the {clients:,} websockets ({CONNECTING} at a time) took "
            f"{seen['connect_s']:.0f} s. The floor: Redis PUBLISH to {clients:,} subscriber connections "
            f"held by this process (redis-py asyncio), {seen['reports']:,} messages of "
            f"{seen['message_bytes']:,} B (a real `change` message) at the same rate; "
            f"{seen['floor_missing']:,} of those deliveries missing. The two rows below the path split "
            "it: the first client to get a report's change (inbox -> actor -> journal -> projector -> "
            "Redis -> query API -> one websocket), and how much later the last client got it (the "
            f"fan-out to {clients:,} websockets, and this process reading them). The latest report started "
            f"{seen['late'] * 1000:.0f} ms behind schedule. CPU while the reports ran, in % of one core "
            "(`others`: processes not of this bench): "
            + ", ".join(f"{name} {pct:.0f}" for name, pct in seen["cpu"].items())
            + ". Target: p99 under 150 ms."
        ),
    }


def main(
    *,
    clients: int = 1000,
    devices: int = 10,
    rate: float = 5.0,
    duration_s: float = 20.0,
    compression: bool = True,
) -> dict[str, Any]:
    from hearth.bench.results import write_result

    began = time.perf_counter()
    result = run_push_bench(
        clients=clients, devices=devices, rate=rate, duration_s=duration_s, compression=compression
    )
    path = write_result("push", result)
    p, f = result["push_ms"], result["floor_redis_pubsub_ms"]
    console.print(
        f"push p50 {p.get('p50')} ms, p99 {p.get('p99')} ms (floor p99 {f.get('p99')} ms), "
        f"{result['deliveries_missing']:,} missing; {time.perf_counter() - began:.0f} s; written to {path}"
    )
    return result
