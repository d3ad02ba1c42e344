"""``hearth bench drill``: the scale-out drill (issue 25 point 3). ``hearth up``'s stack with several of
each part that scales, under steady commands and telemetry, loses one part of each kind in turn to kill
-9; for each kill, how long until it serves again and what became of the commands sent meanwhile.

The stack is ``LocalStack`` (``hearth up --brokers 3 --mqtt-brokers 2 --device-actors 3 --query-apis 2``
by default) under its supervisor, in a temporary directory on free ports, with the simulator and
without Spark. The gateways are one per MQTT shard (2 with 2 shards), not several per shard: a second
gateway on a broker either shares its devices through a shared subscription, which can reorder one
device's reports, or takes a device slice of its own, which makes every gateway of that broker receive
every message (twice the gateways' CPU, on a machine of 2 cores); a killed gateway's devices wait for its
restart in its persistent sessions either way. Each query-API process is one process
(``HEARTH_READ_MODELS_API_WORKERS=1``), so "2 query APIs" is 2 processes, each its own supervised part,
read as a load balancer would (the first that answers).

Load: ``--devices`` simulated thermostats (the stack's simulator, a hub per shard) reporting
``--report-rate`` times a second each, and ``--command-rate`` commands a second from the command API with
an Idempotency-Key each, retried with that key when a call fails
(``hearth_devstack.workload.command_ledger``). One device per shard is kept for probes. Each kill comes
after ``--seconds`` of steady load; it is SIGKILL to the part's main process, and the supervisor restarts
it (``hearth_devstack.supervision.part_kill``). Its figures:

- *healthy s*: from the kill to the supervisor having the part running and healthy again;
- *probe converged s*: from the kill to a probe command per shard, sent once the part is healthy,
  converged as every query-API process answers it (what a client sees: the whole path serves again); a
  probe without its 202 for ``STUCK_S`` makes the command API dump its tasks' stacks to its log;
- *commands*, *lost*, *doubled*, *stuck*: the commands accepted (a 202) from the previous kill's
  recovery to this one's, and of those the ones the query API does not know, requested twice in the
  journal, or without a terminal status once every command had its time to end (0 each is the goal);
  *expired* among them (a terminal status, but a command that did not reach its device in time).

At the end, the journal is checked whole (each fact once, each device's versions 1..N: ``journal_check``)
and the views against a replay (``hearth verify``'s ``verify``: differences, 0 is the goal).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hearth_bench.harness.options import option
from hearth_bench.harness.stack import console
from hearth_devstack.launch.service_processes import instance_names, instance_port
from hearth_devstack.local import LocalStack, StackPorts
from hearth_devstack.servers.kafka_cluster import KafkaCluster
from hearth_devstack.supervision.part_kill import healthy_again, kill_part
from hearth_devstack.supervision.supervisor import RestartPolicy
from hearth_devstack.waiting import NotInTime, eventually
from hearth_devstack.workload.command_ledger import (
    GIVE_UP_S,
    EndedOtherwise,
    Ledger,
    NoAnswer,
    Outcome,
    all_ended,
    converged_everywhere,
    steady,
    submit,
)
from hearth_devstack.workload.journal_check import faultless, journal_faults, read_journal
from hearth_read_models.rebuild.run import verify
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.adapters.http_calls import GatedClient
from hearth_shared.adapters.loop_lag import LoopLag
from hearth_shared.schema.auth import create_token
from hearth_shared.schema.shards import DEFAULT_SHARD, assign_shard

HEALTHY_TIMEOUT_S = 300.0
PROBE_TIMEOUT_S = 180.0
END_TIMEOUT_S = 90.0  # every command ends by its deadline (30 s); one still open after this is stuck
CALLS_SPAN_S = 120  # seconds after each kill whose command calls the result keeps, second by second
CLIENT_HELD_S = 0.5  # the drill's own event loop held this long is counted (its calls waited as long)
STUCK_S = 20.0  # a probe without its 202 this long after its part is healthy: the command API dumps its tasks
REGISTRATIONS_AT_ONCE = 8


@dataclass(frozen=True)
class DrillBench:
    """The scale-out drill: `hearth up`'s stack with several of each part, under steady commands and
    telemetry; one part of each kind killed with -9 in turn; time to serve again and commands lost,
    doubled or stuck per kill; the journal and the views checked at the end."""

    brokers: int = option(3, "Kafka nodes (3: every topic 3 replicas, min.insync.replicas 2)")
    mqtt_brokers: int = option(
        2, "MQTT broker shards, each its Mosquitto, broker-access follower and gateway"
    )
    device_actors: int = option(3, "Device-actor workers")
    query_apis: int = option(2, "Query-API processes")
    devices: int = option(300, "Simulated thermostats, spread over the shards")
    report_rate: float = option(1.0, "Telemetry reports a second per device")
    command_rate: float = option(20.0, "Commands a second from the command API")
    seconds: float = option(30.0, "Seconds of steady load before each kill, and after the last")
    parts: tuple[str, ...] = option((), "A part to kill (repeat; default: one of each kind)", flag="--part")


def victims(stack: LocalStack) -> dict[str, str]:
    """One part of each kind, by kind: a Kafka node (the second: the last one's restart also runs the
    topics' set-up again, which is the local stack's, not Kafka's), the last shard's Mosquitto and
    gateway, the last actor worker and query API, the projector and the command API."""
    kafka = stack.kafka.nodes[1].name if isinstance(stack.kafka, KafkaCluster) else stack.kafka.name
    last_shard = f"-{stack.mqtt_brokers - 1}" if stack.mqtt_brokers > 1 else ""
    return {
        kafka: "Kafka broker",
        f"mosquitto{last_shard}": "MQTT broker shard",
        f"device-gateway{last_shard}": "device gateway",
        instance_names("device-actor", stack.device_actors)[-1]: "device-actor worker",
        instance_names("query-api", stack.query_apis)[-1]: "query-API process",
        "projector": "projector",
        "command-api": "command API",
    }


def drill_stack(params: DrillBench, home: Path) -> LocalStack:
    """``hearth up``'s stack in the drill's shape on free ports under ``home`` (not started)."""
    return LocalStack(
        home=home,
        ports=StackPorts.free(room=6),  # 3 Kafka nodes at the port + 0, 2, 4; shards and query APIs after
        topic_prefix="drill",
        brokers=params.brokers,
        mqtt_brokers=params.mqtt_brokers,
        device_actors=params.device_actors,
        query_apis=params.query_apis,
        simulate=True,
        analytics=False,
        report=lambda message: console.print(f"[dim]{message}[/]", highlight=False),
        policy=RestartPolicy(start_timeout_factor=3.0),  # a shared machine: a slow first start is no crash
        service_env={
            "HEARTH_READ_MODELS_API_WORKERS": "1",
            "HEARTH_SIMULATOR_RATE": str(params.report_rate),
        },
    )


@dataclass
class Clients:
    """The command API and every query-API process, as the drill's clients reach them. The probes have a
    client of their own, as a person would: through the load's they waited their turn behind its calls
    sent again and again while the command API was down."""

    api: GatedClient
    queries: list[GatedClient]
    probe_api: GatedClient


def probes_and_load(devices: list[str], shards: list[str]) -> tuple[list[str], list[str]]:
    """One device per shard for the probes (the first the command API assigns to it), the rest for load."""
    probes = [next(d for d in devices if assign_shard(d, shards) == shard) for shard in shards]
    return probes, [d for d in devices if d not in probes]


async def register(clients: Clients, devices: list[str]) -> None:
    """Register the simulated thermostats (a few at a time), then wait until the simulator plays each."""
    limit = asyncio.Semaphore(REGISTRATIONS_AT_ONCE)

    async def one(device_id: str) -> None:
        body = {"device_id": device_id, "home_id": "drill", "type": "thermostat", "name": device_id}
        async with limit:
            response = await clients.api.post("/v1/devices", json={**body, "simulated": True}, timeout=60)
        if response.status_code != 201:
            raise RuntimeError(f"registering {device_id}: {response.status_code} {response.text}")

    await asyncio.gather(*(one(d) for d in devices))
    playing: set[str] = set()

    async def all_playing() -> bool:
        for device_id in [d for d in devices if d not in playing]:
            response = await clients.queries[0].get(f"/v1/devices/{device_id}")
            if response.status_code == 200 and response.json()["reported"]:
                playing.add(device_id)
        return len(playing) == len(devices)

    took = await eventually(all_playing, "every device reporting", timeout_s=300, every_s=1)
    console.print(f"{len(devices)} devices reporting ({took:.0f} s after their registrations)")


async def kill_and_recover(
    stack: LocalStack, name: str, clients: Clients, ledger: Ledger, probes: list[str], n: int
) -> tuple[float | None, float | None]:
    """Kill the part; seconds from the kill to healthy again and to the probes converged everywhere, each
    None if it did not come within its timeout (the drill goes on; its row says so)."""
    supervisor = stack.supervisor
    assert supervisor is not None
    kill = kill_part(supervisor, name)
    try:
        await eventually(
            lambda: healthy_again(supervisor, kill), f"{name} healthy again", timeout_s=HEALTHY_TIMEOUT_S
        )
    except NotInTime as error:
        console.print(f"[red]{error}[/]")
        return None, None
    healthy_s = time.monotonic() - kill.at
    watchdog = asyncio.create_task(dump_command_api_tasks(stack, after_s=STUCK_S))
    try:
        try:
            sent = [await submit(clients.probe_api, ledger, probe, 18.0 + n % 8) for probe in probes]
        finally:
            watchdog.cancel()
        for command_id in sent:
            await eventually(
                functools.partial(converged_everywhere, clients.queries, command_id),
                f"probe {command_id} converged",
                timeout_s=PROBE_TIMEOUT_S,
                every_s=0.2,
            )
    except (NoAnswer, NotInTime, EndedOtherwise) as error:  # no 202, not in time, or it ended otherwise
        console.print(f"[red]{error}[/]")
        return healthy_s, None
    return healthy_s, time.monotonic() - kill.at


async def dump_command_api_tasks(stack: LocalStack, *, after_s: float) -> None:
    """After ``after_s``: ``kill -USR1`` the command API, which prints each of its asyncio tasks' stacks to
    its log (``hearth_shared.adapters.task_dump``): where a call that gets no 202 waits."""
    await asyncio.sleep(after_s)
    assert stack.supervisor is not None
    child = stack.supervisor.child("command-api")
    if child is not None and child.pid is not None:
        os.kill(child.pid, signal.SIGUSR1)
        console.print(
            f"[yellow]no 202 in {after_s:g} s: the command API (pid {child.pid}) logged its tasks[/]"
        )


async def drill(stack: LocalStack, params: DrillBench, killed: dict[str, str]) -> dict[str, Any]:
    settings = stack.settings
    headers = {"Authorization": f"Bearer {create_token(settings.token_secret, admin=True)}"}
    shards = [DEFAULT_SHARD, *(str(i) for i in range(1, params.mqtt_brokers))]
    devices = [f"drill-thermostat-{i}" for i in range(params.devices)]
    probes, load = probes_and_load(devices, shards)
    ledger = Ledger()
    kills: list[dict[str, Any]] = []
    async with contextlib.AsyncExitStack() as opened:
        api = GatedClient(base_url=f"http://127.0.0.1:{stack.ports.command_api}", headers=headers)
        probe_api = GatedClient(base_url=f"http://127.0.0.1:{stack.ports.command_api}", headers=headers)
        queries = [
            GatedClient(
                base_url=f"http://127.0.0.1:{instance_port(stack.ports.query_api, n)}", headers=headers
            )
            for n in range(1, params.query_apis + 1)
        ]
        for client in (api, probe_api, *queries):
            await opened.enter_async_context(client)
        clients = Clients(api, queries, probe_api)
        await register(clients, devices)
        stop = asyncio.Event()
        driver = asyncio.create_task(steady(api, ledger, load, params.command_rate, stop))
        lag = LoopLag(CLIENT_HELD_S)
        watching = asyncio.create_task(lag.watch())
        window_from = time.monotonic()
        for n, (name, kind) in enumerate(killed.items()):
            await asyncio.sleep(params.seconds)
            console.print(f"killing {name} ({kind}) ...")
            killed_at = time.monotonic()
            healthy_s, converged_s = await kill_and_recover(stack, name, clients, ledger, probes, n)
            window = [c for c, at in ledger.accepted_at.items() if window_from <= at]
            failed = Counter(what for at, what in ledger.failed_calls if window_from <= at)
            held_s = lag.worst_since(window_from)
            window_from = time.monotonic()
            kills.append(
                {
                    "part": name,
                    "kind": kind,
                    "healthy_s": healthy_s,
                    "converged_s": converged_s,
                    "commands": window,
                    "killed_at": killed_at,
                    "client_held_s": held_s,
                }
            )
            console.print(
                f"  {name}: healthy after {seconds(healthy_s)}, probes converged after {seconds(converged_s)}"
                f"; failed calls: {dict(failed) or 'none'}"
            )
        await asyncio.sleep(params.seconds)
        stop.set()
        watching.cancel()
        with contextlib.suppress(NoAnswer):  # counted in the ledger (gave_up): the goal is not met
            await driver
        statuses: dict[str, str | None] = {}
        with contextlib.suppress(NotInTime):
            await eventually(
                lambda: all_ended(queries, ledger, statuses),
                "every command to end",
                timeout_s=END_TIMEOUT_S,
                every_s=1.0,
            )
    journal = journal_faults(await read_journal(settings))
    verified = await verify(ReadModelSettings(stack=settings), processes=1)
    return drill_result(params, ledger, statuses, kills, journal, sum(verified.counts.values()))


def drill_result(
    params: DrillBench,
    ledger: Ledger,
    statuses: dict[str, str | None],
    kills: list[dict[str, Any]],
    journal: dict[str, Any],
    differences: int,
) -> dict[str, Any]:
    twice = journal["doubled_commands"]
    outcome = Outcome.of(ledger, statuses, twice)
    rows = []
    for k in kills:
        window = set(k["commands"])
        counts = outcome.among(window).counts
        rows.append({
            "part": k["part"], "kind": k["kind"], "healthy s": seconds(k["healthy_s"]),
            "probe converged s": seconds(k["converged_s"]), "commands": len(window),
            "slowest 202 s": seconds(max((ledger.waited.get(c, 0.0) for c in window), default=None)),
            "client held s": seconds(k["client_held_s"]),
            **counts,
            "expired": sum(1 for c in window if statuses.get(c) == "expired"),
        })  # fmt: skip
    totals = outcome.counts
    recovered = all(k["healthy_s"] is not None and k["converged_s"] is not None for k in kills)
    goal_met = (
        recovered
        and not any(totals.values())
        and not ledger.gave_up
        and faultless(journal)
        and differences == 0
    )
    return {
        "title": "one part of each kind killed with -9 under commands and telemetry, on a scaled-out stack",
        "params": vars(params),
        "commands": len(ledger.accepted),
        "retried_calls": ledger.retried,
        "never_accepted": len(ledger.gave_up),
        "statuses": dict(Counter(str(s) for s in statuses.values())),
        **{f"{k}_total": v for k, v in totals.items()},
        "journal": {k: v for k, v in journal.items() if k != "repeated"},
        "verify_differences": differences,
        "goal_met": goal_met,
        "rows": rows,
        "calls_after_each_kill": {k["part"]: calls_per_second(ledger, k["killed_at"]) for k in kills},
        "notes": drill_notes(params, ledger, statuses, journal, differences, goal_met),
    }


def drill_notes(
    params: DrillBench,
    ledger: Ledger,
    statuses: dict[str, str | None],
    journal: dict[str, Any],
    differences: int,
    goal_met: bool,
) -> str:
    by_status = ", ".join(f"{n} {s}" for s, n in Counter(str(s) for s in statuses.values()).most_common())
    changed = [
        f"{f.name} {getattr(params, f.name)} (default {f.default})"
        for f in dataclasses.fields(params)
        if getattr(params, f.name) != f.default
    ]
    sentences = [
        "A run with other parameters than the drill's: " + ", ".join(changed) + "." if changed else "",
        f"`hearth up --brokers {params.brokers} --mqtt-brokers {params.mqtt_brokers} --device-actors",
        f"{params.device_actors} --query-apis {params.query_apis}`'s stack (LocalStack under its supervisor,",
        "no Spark; a gateway per MQTT shard; each query API one process) in a temporary directory.",
        f"{params.devices} simulated thermostats at {params.report_rate:g} reports/s each;",
        f"{params.command_rate:g} commands a second from the command API, each with an Idempotency-Key,",
        f"retried with it when a call failed ({ledger.retried} retries); {params.seconds:g} s of it before",
        "each kill and after the last. Each part killed with SIGKILL and restarted by the supervisor.",
        "'healthy s': kill to the supervisor's health check passing again; 'probe converged s': kill to a",
        "command per shard, sent once the part was healthy, converged as every query API answers it.",
        "'slowest 202 s': the longest a command of the window waited from its first call to its 202,",
        "its retries included (the result's `calls_after_each_kill` has what every call got, second by",
        "second, for 120 s after each kill). 'client held s': the longest the drill's own event loop",
        f"was held in that window (0 if never {CLIENT_HELD_S:g} s): its calls waited as long, whatever the",
        "command API did (which logs its own held loop and slow Kafka writes).",
        "'commands': accepted from the previous recovery to this one; lost (unknown to the query API),",
        "doubled (requested twice in the journal), stuck (no terminal status after",
        f"{END_TIMEOUT_S:g} s), expired (ended, but at its deadline).",
        f"Of {len(ledger.accepted):,} commands: {by_status}.",
        f"{len(ledger.gave_up):,} commands never got a 202 (the client gave up after {GIVE_UP_S:g} s)."
        if ledger.gave_up
        else "",
        f"Journal: {journal['records']:,} facts, {len(journal['devices_out_of_order'])} devices out of",
        f"order, {journal['repeated_event_ids']} facts twice, {journal['doubled_requests']} commands",
        f"requested twice; the views against a replay (verify): {differences} differences.",
        "Goal (issue 25): every part back and a command converging after it, every command taken (a 202),",
        "0 lost, doubled and stuck, the journal faultless, the views equal a replay:",
        "met." if goal_met else "NOT met.",
    ]
    return " ".join(s for s in sentences if s)


def calls_per_second(ledger: Ledger, since: float, span_s: int = CALLS_SPAN_S) -> list[dict[str, int]]:
    """What the command calls got in each second from ``since`` (a kill) on: 202s and each failure kind,
    so a stall after a kill shows its shape (503s, timeouts, or no answer at all)."""
    seconds_: list[Counter[str]] = [Counter() for _ in range(span_s)]
    answers = [(at, "202") for at in ledger.accepted_at.values()] + ledger.failed_calls
    for at, what in answers:
        second = int(at - since)
        if 0 <= second < span_s:
            seconds_[second][what] += 1
    return [dict(c) for c in seconds_]


def seconds(value: float | None) -> str:
    """A duration for the table: one decimal, or "-" for one that never came (see kill_and_recover)."""
    return "-" if value is None else f"{value:.1f}"


def run_drill(params: DrillBench, home: Path) -> dict[str, Any]:
    stack = drill_stack(params, home)
    every = victims(stack)
    killed = {name: every.get(name, "part") for name in params.parts} if params.parts else every
    stack.start()
    stop = threading.Event()
    supervising = threading.Thread(target=stack.supervise, args=(stop,), name="supervisor", daemon=True)
    supervising.start()
    try:
        if unknown := set(killed) - {p.name for p in stack.parts}:
            raise ValueError(f"no such part: {sorted(unknown)} (parts: {[p.name for p in stack.parts]})")
        return asyncio.run(drill(stack, params, killed))
    finally:
        stop.set()
        supervising.join(10)
        stack.stop()


def main(params: DrillBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    with tempfile.TemporaryDirectory(prefix="hearth-bench-drill-") as tmp:
        result = run_drill(params, Path(tmp))
    for row in result["rows"]:
        console.print(row)
    path = write_result("drill", result)
    console.print(
        ("[green]goal met[/]" if result["goal_met"] else "[red]goal NOT met[/]") + f"; written to {path}"
    )
    return result
