"""Live push: a device report to the ``change`` message at each of ``clients`` websocket subscribers.

The stack runs on temporary servers (Kafka, PostgreSQL, Redis; the device actor, projector, query API
and command API as processes; no simulator). ``api_processes`` query-API processes run side by side on
their own ports, as a deployment runs one per core behind a load balancer: each has its own Redis
subscription to the home's channel and serves its share of the websockets (client ``i`` connects to
process ``i % api_processes``). ``devices`` thermostats of one home are registered through the command
API and report once; then ``clients`` websockets open ``WS /v1/subscribe?token=``, send
``{"action": "subscribe", "home_id": H}`` and read their snapshots. The clients are as lean as Python
clients get, so that the bench measures the server rather than itself: the ``websockets`` library's
sans-I/O protocol on plain asyncio protocols (permessage-deflate offered, as browsers do, unless
``compression`` is off; the server decides whether to accept it), spread over ``client_processes``
processes of this bench (uvloop). Then state reports of those devices go on the inbox at ``rate`` per
second for ``duration_s`` (open loop), and each one's latency runs from when it was due to be sent until
its ``change`` message (matched by the fact's ``causation_id``, the report's request id) reaches each
client: inbox -> device actor -> journal -> projector (PostgreSQL, Redis PUBLISH) -> the query API's hub
-> each websocket. Each client takes ``time.monotonic()`` when the socket hands it the bytes
(``data_received``), before parsing them; that clock (CLOCK_MONOTONIC) is the machine's, the same in
every process, and is the clock of this process's asyncio loop, which timed the sends. One report makes
one change; every client should get every one.

The floor, in the same run: Redis PUBLISH -> ``clients`` subscribers, each its own connection (RESP read
by hand on plain asyncio protocols, timed the same way), spread over the same number of client
processes, the same number of messages at the same rate, each the size of a real ``change`` message:
what fanning a message out to that many connections, read by these client processes, costs without
Hearth in the way.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis

from hearth_bench.harness.load_client import cpu_share, latency_ms, latency_row, paced
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import BenchStack, bench_stack, console
from hearth_bench.load.push_clients import CONNECTING, HOME, ClientProcesses
from hearth_devstack.local import Services
from hearth_devstack.supervision.ports import free_port
from hearth_devstack.waiting import eventually
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.schema.events import ReportState, encode, new_id, utcnow

DRAIN_S = 15.0  # how long after the last send the changes may take to arrive


# ----------------------------------------------------------------------------------------- reports


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


def _check_clock() -> None:
    """The sends are timed by this process's asyncio loop; the clients by ``time.monotonic()``."""
    loop = asyncio.get_running_loop()
    if abs(loop.time() - time.monotonic()) > 0.001:
        raise RuntimeError("this event loop's clock is not time.monotonic(): the latencies would be wrong")


async def _redis_floor(
    redis_url: str, subscribers: int, processes: int, rate: float, duration_s: float, payload: bytes
) -> tuple[list[float], int, float]:
    """PUBLISH -> ``subscribers`` connections in ``processes`` processes, each message ``payload``-sized;
    latencies, deliveries missing, and the subscriber processes' CPU (% of one core) while publishing."""
    channel = f"bench-floor-{uuid.uuid4().hex[:6]}"
    publisher = Redis.from_url(redis_url)
    due_at: dict[int, float] = {}
    group = ClientProcesses(processes, subscribers, mode="redis", redis_url=redis_url, channel=channel)
    try:
        await group.start()

        async def all_subscribed() -> bool:
            return bool((await publisher.pubsub_numsub(channel))[0][1] >= subscribers)

        await eventually(all_subscribed, f"{subscribers:,} SUBSCRIBEs confirmed", timeout_s=120, every_s=0.1)

        async def publish(i: int, due: float) -> None:
            due_at[i] = due
            await publisher.publish(channel, b"%08d" % i + payload[8:])

        n = round(rate * duration_s)
        cpu_before, began = group.cpu_seconds(), time.monotonic()
        await paced(rate, duration_s, publish)
        arrived = [a for share in await group.results(n, DRAIN_S) for a in share]
        cpu = (group.cpu_seconds() - cpu_before) / (time.monotonic() - began) * 100
        latencies = [at - due_at[i] for at, i in arrived]
        return latencies, n * subscribers - len(latencies), cpu
    finally:
        group.stop()
        await publisher.aclose()


def _more_query_apis(stack: BenchStack, count: int) -> list[str]:
    """Start ``count`` more query-API processes beside the stack's (added to ``stack.parts``); their URLs."""
    urls = []
    for k in range(count):
        port = free_port()
        runner = Services(
            stack.settings,
            logs=stack.services.logs,
            data=stack.services.data,
            query_api_port=port,
            extra_env=stack.services.extra_env,
        )
        part, timeout_s = runner.part("query-api")
        part.name = f"query-api-{k + 2}"
        part.log_path = stack.services.logs / f"{part.name}.log"
        stack.parts[part.name] = part
        part.start()
        part.wait_healthy(timeout_s)
        urls.append(f"http://127.0.0.1:{port}")
    return urls


async def _measure(
    stack: BenchStack,
    *,
    clients: int,
    devices: int,
    rate: float,
    duration_s: float,
    compression: bool,
    api_processes: int,
    client_processes: int,
) -> dict[str, Any]:
    _check_clock()
    device_ids = await stack.register_thermostats(HOME, devices)
    await stack.wait_listed(HOME, devices, online=False)
    reporter = Reporter(stack, device_ids)
    await reporter.producer.start()
    try:
        # One report per device first: all are online, and no `device.came_online` comes in the measurement.
        await reporter.paced(rate=100.0, duration_s=devices / 100.0)
        await stack.wait_listed(HOME, devices, online=True)
        apis = [stack.query_api, *_more_query_apis(stack, api_processes - 1)]
        token = stack.token(HOME)
        urls = [api.replace("http://", "ws://") + f"/v1/subscribe?token={token}" for api in apis]
        console.print(
            f"opening {clients} websockets to {len(urls)} query-API process(es) from {client_processes} "
            f"client processes ({CONNECTING} at a time each), each subscribed to {HOME}"
        )
        group = ClientProcesses(
            client_processes, clients, mode="websocket", urls=urls, devices=devices, compression=compression
        )
        try:
            connect_s = await group.start()
            console.print(f"reports: {rate:g}/s for {duration_s:g} s, over {devices} thermostats")
            before, began = stack.cpu_seconds(), time.monotonic()
            before["bench client processes"] = group.cpu_seconds()
            due_at, late = await reporter.paced(rate, duration_s)
            expected = len(due_at)
            answers = await group.results(expected, DRAIN_S)
            after = stack.cpu_seconds()
            after["bench client processes"] = group.cpu_seconds()
            cpu = cpu_share(before, after, time.monotonic() - began)
            stack.check_running()
        finally:
            group.stop()
    finally:
        await reporter.producer.stop()
    by_report: dict[uuid.UUID, list[float]] = {request_id: [] for request_id in due_at}
    for share, _ in answers:
        for client in share:
            for at, request_id in client:
                if request_id in by_report:
                    by_report[request_id].append(at - due_at[request_id])
    sample = next((sample for _, sample in answers if sample is not None), None)
    if sample is None:
        raise RuntimeError("no change message arrived at any client")
    payload = sample
    console.print(f"floor: Redis PUBLISH to {clients} subscribers, {rate:g}/s for {duration_s:g} s")
    floor, floor_missing, floor_cpu = await _redis_floor(
        stack.settings.redis_url, clients, client_processes, rate, duration_s, payload
    )
    return {
        "latencies": [latency for report in by_report.values() for latency in report],
        "first": [min(report) for report in by_report.values() if report],
        "spread": [max(report) - min(report) for report in by_report.values() if report],
        "missing": expected * clients - sum(map(len, by_report.values())),
        "late": late,
        "cpu": cpu,
        "floor_cpu": round(floor_cpu),
        "connect_s": connect_s,
        "message_bytes": len(payload),
        "floor": floor,
        "floor_missing": floor_missing,
        "reports": expected,
    }


def run_push_bench(
    *,
    clients: int,
    devices: int,
    rate: float,
    duration_s: float,
    compression: bool,
    api_processes: int,
    client_processes: int,
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
                api_processes=api_processes,
                client_processes=client_processes,
            )
        )
    push = latency_ms(seen["latencies"])
    floor = latency_ms(seen["floor"])
    first, spread = latency_ms(seen["first"]), latency_ms(seen["spread"])
    deliveries = seen["reports"] * clients
    return {
        "title": f"live push: report -> change message at {clients:,} websocket subscribers",
        "clients": clients,
        "compression": "permessage-deflate offered" if compression else "none",
        "devices": devices,
        "rate_per_s": rate,
        "duration_s": duration_s,
        "query_api_processes": api_processes,
        "client_processes": client_processes,
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
        "floor_client_cpu_percent_of_one_core": seen["floor_cpu"],
        "rows": [
            latency_row(f"Redis PUBLISH -> {clients:,} subscribers (floor)", floor),
            latency_row(f"inbox report -> `change` at {clients:,} websockets", push, floor),
            latency_row("  the first client to get each report's change", first, ratios=False),
            latency_row("  each report: last client's arrival - first's", spread, ratios=False),
        ],
        "notes": (
            f"{seen['reports']:,} state reports at {rate:g}/s for {duration_s:g} s over {devices} "
            f"thermostats of one home, put on the inbox (as the gateway does), each to be delivered to "
            f"{clients:,} websocket subscribers of that home (`WS /v1/subscribe?token=`) served by "
            f"{api_processes} query-API process(es) side by side (clients assigned round robin, as a load "
            "balancer would; each process has its own Redis subscription). The clients: the websockets "
            "library's sans-I/O protocol on plain asyncio protocols, "
            + (
                "permessage-deflate offered as browsers do (the query API declines it)"
                if compression
                else "compression off"
            )
            + f", spread over {client_processes} bench processes (uvloop) so that the bench's own reading "
            f"of {clients:,} sockets is not what is measured: "
            f"{deliveries - seen['missing']:,} of {deliveries:,} deliveries arrived within "
            f"{DRAIN_S:g} s of the last send. Latency per delivery from when the report was due to be "
            "sent until its `change` (matched by the fact's `causation_id`) reached that client "
            "(`time.monotonic()` taken when the socket handed over the bytes, before parsing; the same "
            f"clock in every process). Opening and subscribing the {clients:,} websockets took "
            f"{seen['connect_s']:.0f} s. The floor: Redis PUBLISH to {clients:,} subscriber connections "
            f"(RESP read by hand, timed the same way) spread over the same {client_processes} processes, "
            f"{seen['reports']:,} "
            f"messages of {seen['message_bytes']:,} B (a real `change` message) at the same rate; "
            f"{seen['floor_missing']:,} of those deliveries missing; its subscriber processes used "
            f"{seen['floor_cpu']} % of one core. The two rows below the path split "
            "it: the first client to get a report's change (inbox -> actor -> journal -> projector -> "
            "Redis -> query API -> one websocket), and how much later the last client got it (the "
            f"fan-out to {clients:,} websockets, and the client processes reading them). The latest report "
            f"started {seen['late'] * 1000:.0f} ms behind schedule. CPU while the reports ran, in % of one "
            "core (`others`: processes not of this bench): "
            + ", ".join(f"{name} {pct:.0f}" for name, pct in seen["cpu"].items())
            + ". Target: p99 under 150 ms: "
            + ("met." if push.get("p99", float("inf")) < 150 else "NOT met.")
        ),
    }


@dataclass(frozen=True)
class PushBench:
    """Report-to-websocket latency at each subscriber, against Redis PUBLISH to as many (temp. servers)."""

    clients: int = option(1000, "Websocket subscribers of the home")
    devices: int = option(10, "Thermostats of the home")
    rate: float = option(5.0, "State reports per second")
    duration_s: float = option(20.0, "Seconds of reports", flag="--duration")
    compression: bool = option(True, "Offer permessage-deflate, as browsers do")
    api_processes: int = option(2, "Query API processes the subscribers are spread over")
    client_processes: int = option(4, "Bench processes holding the subscribers' websockets")


def main(params: PushBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    began = time.perf_counter()
    result = run_push_bench(**asdict(params))
    path = write_result("push", result)
    p, f = result["push_ms"], result["floor_redis_pubsub_ms"]
    console.print(
        f"push p50 {p.get('p50')} ms, p99 {p.get('p99')} ms (floor p99 {f.get('p99')} ms), "
        f"{result['deliveries_missing']:,} missing; {time.perf_counter() - began:.0f} s; written to {path}"
    )
    return result
