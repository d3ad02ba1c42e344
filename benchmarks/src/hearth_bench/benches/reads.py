"""Twin reads: ``GET /v1/devices/{id}`` of the query API, as many as ``concurrency`` requests at a time.

The stack runs on temporary servers (Kafka, PostgreSQL, Redis; the device actor, projector, query API,
command API and the fleet simulator as processes). ``devices`` thermostats of one home are registered
through the command API and played by the simulator, which keeps reporting ``telemetry_rate`` readings
per second per device while the reads run, so the views keep changing under them. Once every device is
online, one lean HTTP client (``LeanHttp``) with ``concurrency`` connections reads random twins of the
home (with the home's token), closed loop, for ``duration_s``: reads per second and the latency of each.

The floor, in the same run with the same client and concurrency, measured first: ``GET /healthz`` of the
same query API, which runs ``SELECT 1`` on PostgreSQL and a Redis ``PING`` (a twin read is one Redis
``GET`` when the twin is cached, as it is here, after the token is checked).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from hearth_bench.harness.load_client import LEAN_ERRORS, LeanHttp, LeanResponse, cpu_share, latency_ms
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import bench_stack, console

HOME = "bench-reads"


@dataclass
class Run:
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)

    @property
    def per_s(self) -> float:
        return len(self.latencies) / self.seconds

    @property
    def server_cpu_ms(self) -> float:
        """The query API's CPU time per answered request."""
        return self.cpu["query-api"] / 100 * self.seconds / len(self.latencies) * 1000


async def closed_loop(
    concurrency: int, duration_s: float, request: Callable[[], Awaitable[LeanResponse]]
) -> Run:
    """``concurrency`` loops each sending ``request()`` again as soon as the last one is answered, until
    ``duration_s`` has passed; the latencies of the 200 answers and every outcome."""
    loop = asyncio.get_running_loop()
    run = Run()
    began = loop.time()
    deadline = began + duration_s

    async def worker() -> None:
        while (start := loop.time()) < deadline:
            try:
                response = await request()
            except LEAN_ERRORS as error:
                run.statuses[f"error {type(error).__name__}"] += 1
                continue
            run.statuses[f"HTTP {response.status_code}"] += 1
            if response.status_code == 200:
                run.latencies.append(loop.time() - start)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    run.seconds = loop.time() - began
    return run


def _row(path: str, run: Run, floor: Run) -> dict[str, Any]:
    figures, base = latency_ms(run.latencies), latency_ms(floor.latencies)
    return {
        "path": path,
        "requests/s": round(run.per_s),
        "ratio": round(run.per_s / floor.per_s, 2),
        "p50 ms": figures["p50"],
        "p99 ms": figures["p99"],
        "max ms": figures["max"],
        "p99 ratio": round(figures["p99"] / base["p99"], 2),
        "query API CPU ms/request": round(run.server_cpu_ms, 2),
    }


def run_reads_bench(
    *, devices: int, concurrency: int, duration_s: float, floor_s: float, telemetry_rate: float
) -> dict[str, Any]:
    env = {"HEARTH_SIMULATOR_RATE": str(telemetry_rate)}
    services = ("device-actor", "projector", "query-api", "command-api", "simulator")
    with bench_stack("reads", services=services, env=env) as stack:

        async def main() -> tuple[Run, Run]:
            device_ids = await stack.register_thermostats(HOME, devices)
            console.print(f"registered {len(device_ids)} thermostats; waiting until they are all online")
            await stack.wait_listed(HOME, devices, online=True)
            headers = {"Authorization": f"Bearer {stack.token(HOME)}"}
            rng = random.Random(7)
            async with LeanHttp(stack.query_api, connections=concurrency, headers=headers) as client:
                console.print(f"floor: GET /healthz, {concurrency} at a time for {floor_s:g} s")
                before = stack.cpu_seconds()
                floor = await closed_loop(concurrency, floor_s, lambda: client.request("GET", "/healthz"))
                floor.cpu = cpu_share(before, stack.cpu_seconds(), floor.seconds)
                console.print(f"reads: GET /v1/devices/{{id}}, {concurrency} at a time for {duration_s:g} s")
                before = stack.cpu_seconds()
                reads = await closed_loop(
                    concurrency,
                    duration_s,
                    lambda: client.request("GET", f"/v1/devices/{rng.choice(device_ids)}"),
                )
                reads.cpu = cpu_share(before, stack.cpu_seconds(), reads.seconds)
            stack.check_running()
            return floor, reads

        floor, reads = asyncio.run(main())
    return {
        "title": "twin reads through the query API",
        "devices": devices,
        "concurrency": concurrency,
        "duration_s": duration_s,
        "telemetry_per_device_per_s": telemetry_rate,
        "floor_healthz": {"per_s": round(floor.per_s), **latency_ms(floor.latencies)},
        "floor_outcomes": dict(floor.statuses),
        "reads": {"per_s": round(reads.per_s), **latency_ms(reads.latencies)},
        "outcomes": dict(reads.statuses),
        "cpu_percent_of_one_core": reads.cpu,
        "floor_cpu_percent_of_one_core": floor.cpu,
        "rows": [
            _row("GET /healthz, query API (floor)", floor, floor),
            _row("GET /v1/devices/{id}", reads, floor),
        ],
        "notes": (
            f"One lean HTTP/1.1 client (`LeanHttp`; httpx took about 2 ms of client CPU a request here), "
            f"{concurrency} requests at a time (closed loop), reading random twins "
            f"of {devices:,} simulated thermostats of one home with the home's token for {duration_s:g} s: "
            + ", ".join(f"{n:,} {status}" for status, n in reads.statuses.most_common())
            + f". The simulator kept sending {telemetry_rate:g} reports/s per thermostat "
            f"({telemetry_rate * devices:,.0f}/s in all), so the projector kept writing the twins read. "
            f"The floor is `GET /healthz` of the same query API for {floor_s:g} s with the same client "
            "just before; it is not an empty route: it runs `SELECT 1` on PostgreSQL and a Redis `PING`, "
            "where a read of a cached twin is one Redis `GET`. 'query API CPU ms/request' is the query "
            "API process's CPU time over the requests answered, a figure that depends less on what else "
            "the machine runs than the rates do. CPU while the reads ran, in % of one core (`others`: "
            "processes not of this bench): "
            + ", ".join(f"{name} {pct:.0f}" for name, pct in reads.cpu.items())
            + "."
        ),
    }


@dataclass(frozen=True)
class ReadsBench:
    """Twin reads per second and their latency, against GET /healthz of the same API (temporary servers)."""

    devices: int = option(1000, "Simulated thermostats whose twins are read")
    concurrency: int = option(8, "Requests in flight")
    duration_s: float = option(20.0, "Seconds of reads", flag="--duration")
    floor_s: float = option(10.0, "Seconds of GET /healthz (the floor)", flag="--floor-duration")
    telemetry_rate: float = option(0.1, "Telemetry reports/s per thermostat")


def main(params: ReadsBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    result = run_reads_bench(**asdict(params))
    path = write_result("reads", result)
    r, f = result["reads"], result["floor_healthz"]
    console.print(
        f"reads {r['per_s']:,}/s, p99 {r.get('p99')} ms (floor {f['per_s']:,}/s, p99 {f.get('p99')} ms); "
        f"written to {path}"
    )
    return result
