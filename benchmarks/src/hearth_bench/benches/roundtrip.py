"""Command round trip: POST a command with ``?wait=converged`` until the answer says converged.

The whole stack runs on temporary servers (Kafka, PostgreSQL, Redis, Mosquitto; the device actor,
projector, query API, command API, broker-access follower, one device gateway and the fleet simulator as
processes). The simulator plays the thermostats over MQTT, as devices do: nothing in the device's path
writes Kafka but the gateway. The simulator plays ``devices`` thermostats of
one home, registered through the command API; once all of them are online, for each rate in turn,
commands (``set_target_temperature``, a new target each time, round robin over the devices) go to the
command API at that rate for ``duration_s`` from this process (asyncio, ``LeanHttp``), open loop, each with
``?wait=converged&timeout_s=10``. A command's latency runs from when it was due to be sent to the
answer: command API -> inbox -> device actor -> journal and device-bound topic -> gateway -> MQTT
(Mosquitto) -> simulator -> ack and report over MQTT -> gateway -> inbox -> device actor -> journal -> the
command API's device book.

The floor, in the same run with the same client at the same rate, measured just before each rate's
commands: ``GET /healthz`` of the command API (an HTTP round trip to the same server that does no work).

Where the time goes: afterwards the inbox and the journal are read back, and each converged command's
path is cut into stages by the wall-clock times the client and the stack wrote down (when the client let
the request through to a connection, the API's ``sent_at`` on the inbox request, the actor's
``recorded_at`` on the facts); all processes share the machine's clock.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from hearth_bench.harness.load_client import LEAN_ERRORS, LeanHttp, cpu_share, latency_ms, latency_row, paced
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import BenchStack, bench_stack, console, read_topic
from hearth_shared.schema.events import (
    COMMAND_STATUS_BY_EVENT,
    MalformedRecord,
    SubmitCommand,
    decode_event,
    decode_inbound,
)

HOME = "bench-home"
WAIT_TIMEOUT_S = 10.0
WARMUP_S = 2.0
# The client: 256 keep-alive connections (``LeanHttp``: httpx itself was the bottleneck), so at most 256
# requests in flight; one due meanwhile waits its turn in the client, and that wait counts. 256 carry
# 200 commands/s as long as a round trip takes under 1.28 s.
CONNECTIONS = 256
PROBE_RATE = 5.0  # GET /healthz per second while the commands run: is the command API answering at all?
# (stage, from, to): the times a command's path passes, in order (see ``_stages``).
STAGES = (
    ("waiting in the client for a connection", "due", "sent"),
    ("-> command API handler", "sent", "submitted"),
    ("-> actor accepted and dispatched it", "submitted", "dispatched"),
    ("-> simulator acked, actor recorded it", "dispatched", "acknowledged"),
    ("-> report in, actor recorded converged", "acknowledged", "converged"),
    ("-> answer at the client (device book, HTTP)", "converged", "answered"),
)


@dataclass
class Tally:
    """What came back: latencies of the requests that got what they wanted, every outcome, and for
    commands their wall-clock times by command id (``due``, ``sent``, ``answered``; ``mark_commands`` adds the
    stack's)."""

    latencies: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    times: dict[uuid.UUID, dict[str, float]] = field(default_factory=dict)
    late: float = 0.0  # how late the latest send started, s
    seconds: float = 0.0  # from the first send until the last answer
    cpu: dict[str, float] = field(default_factory=dict)  # % of one core per part while it ran


@dataclass
class Step:
    """One rate: the floor at that rate, then the commands."""

    rate: float
    floor: Tally
    commands: Tally
    probe: Tally  # GET /healthz now and then while the commands run, through a client of its own


async def _measure(
    stack: BenchStack, device_ids: list[str], rates: list[float], duration_s: float, floor_s: float
) -> list[Step]:
    headers = {"Authorization": f"Bearer {stack.token()}"}
    loop = asyncio.get_running_loop()
    wall = time.time() - loop.time()  # loop time -> wall-clock time
    async with (
        LeanHttp(stack.command_api, connections=CONNECTIONS, headers=headers) as client,
        LeanHttp(stack.command_api, connections=4, headers=headers) as prober,
    ):

        def healthz(tally: Tally, via: LeanHttp) -> Callable[[int, float], Awaitable[None]]:
            async def health(i: int, due: float) -> None:
                try:
                    response = await via.request("GET", "/healthz")
                except LEAN_ERRORS as error:
                    tally.outcomes[f"error {type(error).__name__}"] += 1
                    return
                tally.outcomes[f"HTTP {response.status_code}"] += 1
                if response.status_code == 200:
                    tally.latencies.append(loop.time() - due)

            return health

        def commands(tally: Tally) -> Callable[[int, float], Awaitable[None]]:
            async def command(i: int, due: float) -> None:
                device_id = device_ids[i % len(device_ids)]
                target = 18.0 + ((i // len(device_ids) + i) % 9) * 0.5  # never the device's last target
                try:
                    sent, response = await client.timed(
                        "POST",
                        f"/v1/devices/{device_id}/commands",
                        params={"wait": "converged", "timeout_s": WAIT_TIMEOUT_S},
                        json={"name": "set_target_temperature", "params": {"target_c": target}},
                    )
                except LEAN_ERRORS as error:
                    tally.outcomes[f"error {type(error).__name__}"] += 1
                    return
                answered = loop.time()
                if response.status_code != 200:
                    tally.outcomes[f"HTTP {response.status_code}"] += 1
                    return
                body = response.json()
                status = body["status"]
                tally.outcomes[f"timed out at {status}" if body.get("timed_out") else status] += 1
                if status == "converged":
                    tally.latencies.append(answered - due)
                    times = {"due": wall + due, "sent": wall + sent, "answered": wall + answered}
                    tally.times[uuid.UUID(body["command_id"])] = times

            return command

        steps = []
        for rate in rates:
            step = Step(rate, Tally(), Tally(), Tally())
            console.print(f"floor: GET /healthz at {rate:g}/s for {floor_s:g} s")
            step.floor.late = await paced(rate, floor_s, healthz(step.floor, client))
            console.print(f"warming up: {WARMUP_S:g} s of commands at {rate:g}/s (not counted)")
            await paced(rate, WARMUP_S, commands(Tally()))
            console.print(f"commands: {rate:g}/s for {duration_s:g} s, each waiting for converged")
            measured = step.commands
            cpu_before, began = stack.cpu_seconds(), loop.time()
            measured.late, _ = await asyncio.gather(
                paced(rate, duration_s, commands(measured)),
                paced(PROBE_RATE, duration_s, healthz(step.probe, prober)),
            )
            measured.seconds = loop.time() - began
            measured.cpu = cpu_share(cpu_before, stack.cpu_seconds(), measured.seconds)
            stack.check_running()
            steps.append(step)
    return steps


async def mark_commands(
    stack: BenchStack,
    times: dict[uuid.UUID, dict[str, float]],
    adopt: Callable[[SubmitCommand], bool] = lambda request: False,
) -> None:
    """Add to each command's times those its request (on the command lane: ``submitted``, the sender's
    ``sent_at``) and facts carry (each status's fact's ``recorded_at``, by status name). ``adopt``: which
    other commands' requests to add to ``times`` (e.g. those an automation sent)."""
    topics = stack.settings.topics
    async for value in read_topic(stack.settings, topics.command_lane):
        if b"submit_command" in value:
            request = decode_inbound(value)
            if isinstance(request, SubmitCommand) and (request.command_id in times or adopt(request)):
                times.setdefault(request.command_id, {})["submitted"] = request.sent_at.timestamp()
    async for value in read_topic(stack.settings, topics.journal):
        if b'"type":"command.' not in value[:40]:
            continue
        try:
            event = decode_event(value)
        except MalformedRecord:
            continue
        status = COMMAND_STATUS_BY_EVENT.get(type(event))
        if event.correlation_id in times and status is not None:
            times[event.correlation_id][status] = event.recorded_at.timestamp()


def _stages(times: dict[uuid.UUID, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each command's time cut into ``STAGES``; the figures of each stage."""
    complete = [t for t in times.values() if all(point in t for _, point, _ in STAGES)]
    return {name: latency_ms([t[end] - t[start] for t in complete]) for name, start, end in STAGES}


def _summary(step: Step, duration_s: float) -> dict[str, Any]:
    commands = step.commands
    sent = round(step.rate * duration_s)
    converged = commands.outcomes["converged"]
    return {
        "rate_per_s": step.rate,
        "commands_sent": sent,
        "outcomes": dict(commands.outcomes.most_common()),
        "converged_share": round(converged / sent, 4),
        "seconds_to_last_answer": round(commands.seconds, 1),
        "converged_per_s": round(converged / commands.seconds, 1),
        "floor_healthz_ms": latency_ms(step.floor.latencies),
        "floor_outcomes": dict(step.floor.outcomes),
        "floor_latest_start_s": round(step.floor.late, 3),
        "probe_healthz_ms": latency_ms(step.probe.latencies),
        "command_ms": latency_ms(commands.latencies),
        "stages_ms": _stages(commands.times),
        "latest_start_s": round(commands.late, 3),
        "cpu_percent_of_one_core": commands.cpu,
    }


def _rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    rate = f"{s['rate_per_s']:g}/s"
    return [
        latency_row(f"{rate}: GET /healthz, command API (floor)", s["floor_healthz_ms"]),
        latency_row(
            f"{rate}: POST command ?wait=converged -> converged", s["command_ms"], s["floor_healthz_ms"]
        ),
        latency_row(f"{rate}: GET /healthz meanwhile (probe)", s["probe_healthz_ms"], s["floor_healthz_ms"]),
        *(
            latency_row(f"{rate} stage: {name}", figures, ratios=False)
            for name, figures in s["stages_ms"].items()
        ),
    ]


def _step_notes(s: dict[str, Any]) -> str:
    return (
        f"At {s['rate_per_s']:g}/s: "
        + ", ".join(f"{n:,} {status}" for status, n in s["outcomes"].items())
        + f" of {s['commands_sent']:,} ({s['converged_share']:.1%} converged); the last answer came "
        f"{s['seconds_to_last_answer']:.1f} s after the first send ({s['converged_per_s']:.0f} converged/s); "
        f"the latest send started {s['latest_start_s'] * 1000:.0f} ms behind schedule (floor: "
        f"{s['floor_latest_start_s'] * 1000:.0f} ms); CPU while the commands ran, in % of one core "
        "(`others`: processes not of this bench): "
        + ", ".join(f"{name} {pct:.0f}" for name, pct in s["cpu_percent_of_one_core"].items())
        + "."
    )


def run_roundtrip_bench(
    *, devices: int, rates: list[float], duration_s: float, floor_s: float, telemetry_rate: float
) -> dict[str, Any]:
    env = {"HEARTH_SIMULATOR_RATE": str(telemetry_rate)}
    services = ("device-actor", "projector", "query-api", "command-api", "simulator")
    with bench_stack("roundtrip", services=services, env=env) as stack:

        async def main() -> list[Step]:
            device_ids = await stack.register_thermostats(HOME, devices)
            console.print(f"registered {len(device_ids)} thermostats; waiting until they are all online")
            await stack.wait_listed(HOME, devices, online=True)
            steps = await _measure(stack, device_ids, rates, duration_s, floor_s)
            console.print("reading the inbox and the journal back for the stages")
            await mark_commands(stack, {k: v for step in steps for k, v in step.commands.times.items()})
            return steps

        steps = [_summary(step, duration_s) for step in asyncio.run(main())]
    return {
        "title": "command round trip, POST to converged (whole stack)",
        "devices": devices,
        "duration_s": duration_s,
        "telemetry_per_device_per_s": telemetry_rate,
        "steps": steps,
        "rows": [row for step in steps for row in _rows(step)],
        "notes": (
            f"Per rate: `GET /healthz` of the command API for {floor_s:g} s (the floor: an HTTP round trip "
            f"to the same server, same client, same rate), {WARMUP_S:g} s of commands not counted, then "
            f"{duration_s:g} s of `set_target_temperature` commands, round robin over {devices:,} "
            f"simulated thermostats of one home, each POSTed with "
            f"`?wait=converged&timeout_s={WAIT_TIMEOUT_S:g}` from one client process (asyncio, "
            f"{CONNECTIONS} keep-alive connections of a minimal HTTP/1.1 client: an httpx client was "
            "itself the bottleneck at 200/s, see `hearth_bench.harness.load_client.LeanHttp`), open loop; "
            f"latency from the moment a command was due to the answer. At most {CONNECTIONS} requests are in "
            "flight; a command due meanwhile waits "
            "in the client, and that wait counts. The percentiles are of the converged commands. The "
            "stages cut each of them by the times the client and the stack wrote down (the client's "
            "when it let the request through to a connection, the API's `sent_at` on the inbox "
            "request, the actor's `recorded_at`: the start of the batch that decided the fact); each "
            "stage's percentiles stand alone and do not add up. The probe: `GET /healthz` at "
            f"{PROBE_RATE:g}/s while the commands run, through a client of its own (4 connections): how "
            "fast the command API answers meanwhile. The simulator also sends "
            f"{telemetry_rate:g} telemetry reports/s per thermostat ({telemetry_rate * devices:,.0f}/s "
            "in all). "
            + " ".join(_step_notes(step) for step in steps)
            + " Target (issue 11): p99 under 100 ms at 400/s: "
            + next(
                (
                    f"{'met' if s['command_ms']['p99'] < 100 else 'not met'} "
                    f"({s['command_ms']['p99']:.0f} ms)"
                    for s in steps
                    if s["rate_per_s"] == 400
                ),
                "not measured (run with --rate 400)",
            )
            + "."
        ),
    }


@dataclass(frozen=True)
class RoundtripBench:
    """POST-to-converged command latency through the whole stack, against GET /healthz (temporary servers)."""

    devices: int = option(500, "Simulated thermostats the commands go to")
    rates: tuple[float, ...] = option((50.0, 200.0), "Commands per second (repeat for more)", flag="--rate")
    duration_s: float = option(30.0, "Seconds of commands per rate", flag="--duration")
    floor_s: float = option(10.0, "Seconds of GET /healthz per rate (the floor)", flag="--floor-duration")
    telemetry_rate: float = option(0.1, "Telemetry reports/s per thermostat")


def main(params: RoundtripBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    result = run_roundtrip_bench(
        devices=params.devices,
        rates=list(params.rates),
        duration_s=params.duration_s,
        floor_s=params.floor_s,
        telemetry_rate=params.telemetry_rate,
    )
    path = write_result("roundtrip", result)
    for s in result["steps"]:
        c, f = s["command_ms"], s["floor_healthz_ms"]
        console.print(
            f"{s['rate_per_s']:g}/s: round trip p50 {c.get('p50')} ms, p99 {c.get('p99')} ms "
            f"(floor p99 {f.get('p99')} ms); {s['outcomes']}"
        )
    console.print(f"written to {path}")
    return result
