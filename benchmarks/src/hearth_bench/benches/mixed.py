"""``hearth bench mixed``: commands under telemetry load. First the highest telemetry rate the device actor
sustains, found in the same run; then telemetry at 90 % and at 200 % of it (and none, the floor), each
with ``--command-rate`` commands/s from the API and as many from automations.

The stack: temporary servers and the whole live path as processes (``bench_stack``: device actor,
projector, query API, command API, automations service, and the fleet simulator with its gateway and
Mosquitto). Three kinds of device, one job each:

- **Load thermostats** (``--devices``, in homes of 10 without automations; ids numbered after the
  trigger thermostats'): the telemetry. Registered on the command lane and read straight onto the
  inbox's telemetry lane (``topics.inbox``) by this process (``send_readings``, the automations bench's
  sender), not through MQTT and the gateway: this bench is about the actor's two lanes and its
  coalescing, and what the gateway carries has its own bench (``hearth bench gateway``); one Python MQTT
  client would also cap the rate far below what the actor folds.
- **Trigger thermostats** (``--command-rate`` x ``TRIGGER_PERIOD_S`` of them, in ``HOME``, the same
  lane): each reads hot and calm in turn, ``TRIGGER_PERIOD_S`` / 2 apart, and has one automation
  (``ambient_c`` above ``THRESHOLD_C``, mode parallel) whose action commands a simulated thermostat: so
  the automations' commands are made by telemetry, ``--command-rate`` a second, each automation at most
  once every ``TRIGGER_PERIOD_S`` (its loop breaker allows 20 runs a minute). Their readings (twice the
  command rate) travel with the load and count in the telemetry rate.
- **Simulated thermostats** (``--commanded`` for the API's commands and as many for the automations', in
  ``HOME``): played by the simulator over MQTT, so a command is dispatched, acknowledged and converges as
  with a real device. Each gets a new target each time (an automation's target is its own, and the ones
  commanding a device follow each other with different targets).

The search (coalescing off: a separate start of the actor with ``HEARTH_DEVICE_ACTOR_COALESCE_AFTER=0``,
because with coalescing on the actor keeps up with any rate by folding readings, which is what the 200 %
phase is for): telemetry at ``--search-from`` readings/s, then ``--search-factor`` times more per step,
each for ``--search-duration`` s and with the phases' commands (the API's and the automations', the
trigger readings counted in the rate), until a step is not sustained (``mixed_figures.sustained``: the
telemetry lane's lag, from the actor's serving file each second, stays within ``LAG_BOUND_S`` of readings
in the step's second half), or until the bench's sender falls more than 5 % short of the rate offered
(``sender_short``: one Python producer on a shared machine; the ceiling is then the client's, a lower
bound of the actor's, and the result says so); between steps the actor catches up. The ceiling is the
highest rate achieved in a step sustained. Then the actor is restarted with coalescing on. The steps
carry the commands because the phases do: "90 %" is meant to be a rate the stack keeps up with while it
serves them. The first searches sent telemetry alone, and in their 90 % phases the stack fell behind (a
reading's way to its fact p50 8.9 s, growing over the phase), so those phases measured an overload.

Each phase: load readings at the phase's share of the ceiling minus the trigger readings, the trigger
readings, and the API's commands (``POST /v1/devices/{id}/commands``, no wait, open loop at
``--command-rate``, ``LeanHttp``), for ``--duration`` s; then the bench waits until the actor has caught up
and the commands have settled (the floor phase's commands are the same, with no load telemetry). Every
phase and search step starts on a quiet machine (``BenchStack.quiet``): the actor's lanes at no lag, and the
journal's other readers (projector, automations) done with what the step before left them, which the
first runs did not wait for. Each group of commands also has its dispatch p99 per 10 s of the phase, to
tell a tail spread over the phase from one stretch of it. Where
each time comes from (all processes share the machine's clock):
requested is the request's ``sent_at`` on the command lane (the command API's, or the automations
service's); dispatched and converged are the actor's ``recorded_at`` on ``command.dispatched`` and
``command.converged`` (``mark_commands``, the round-trip bench's). Telemetry lag: the lane's lag in
records, sampled each second, and per load reading its ``device_time`` (set when this process sent it) to
its fact's ``recorded_at``.

Nothing lost: every reading of the load and trigger thermostats the bench sent in a phase is a
``device.state_reported`` fact (found by device and ``device_seq``; a coalesced one carries the newest
seq), or was coalesced, or came after a newer report of its device and is no fact (the actor's counts in
its serving file, before and after the phase; such a late report is a simulated thermostat's reading
that its ack's report overtook on the command lane): the account's
``unaccounted`` is 0. The count is the actor's, of every device, so the simulated thermostats' reports of
the phase count too: those on the telemetry lane with a ``sent_at`` in the phase's window (from its start
to when the actor had caught up after it; the actor is caught up at both ends, so no batch straddles
them), and their facts found by device and ``device_seq``. Every command ends in a terminal status, or is
counted ``unfinished``: each carries a deadline of ``EXPIRES_IN_S`` (the API's ``expires_in_s``, the
automations service's ``HEARTH_AUTOMATIONS_COMMAND_EXPIRES_IN_S``) and the bench waits that long after
the last phase, since a command dispatched and then overtaken by the next one of the same setting before
it converged is never superseded (only commands not dispatched yet are): it ends ``expired``, and the
result counts those. ``--coalesce-after`` sets the actor's threshold for the phases (its default
otherwise): the threshold is per partition, so a small smoke run needs a low one to see coalescing at
all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from hearth_bench.benches.roundtrip import mark_commands
from hearth_bench.figures.mixed_figures import (
    command_figures,
    highest_sustained,
    reading_account,
    search_rates,
    sender_short,
    sustained,
)
from hearth_bench.harness.load_client import LEAN_ERRORS, LeanHttp, cpu_share, latency_ms, latency_row, paced
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import BenchStack, bench_stack, console, read_topic
from hearth_bench.load.automation_fleet import (
    HOME_SIZE,
    HOT_C,
    THRESHOLD_C,
    created_facts,
    device_id,
    reading,
)
from hearth_bench.load.automation_latency import send_readings
from hearth_device_actor.adapters.serving import Serving, read_serving, serving_file
from hearth_devstack.waiting import steadily
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.domain.automation import Action, Automation, CommandAction, StateTest, Trigger
from hearth_shared.domain.home_facts import encode_home_fact
from hearth_shared.schema.events import (
    RegisterDevice,
    ReportState,
    SubmitCommand,
    decode_inbound,
    encode,
    new_id,
    utcnow,
)

HOME = "bench-mixed-home"
TRIGGER_PERIOD_S = 10.0  # a trigger thermostat reads hot once in this, calm in between
OWN_DEVICES = device_id(0)[:-7].encode()  # what the ids of the bench's own thermostats start with
NEVER = 10**9  # ``reading``'s cross_every for the load: none of its readings is hot
CALM_S = 2.0  # the actor counts as caught up after this long at no lag
SETTLE_TIMEOUT_S = 120.0
CONNECTIONS = 64
# Every command's deadline (the API's and the automations'): one not converged by then expires, so every
# command of the run has ended when the bench reads them back (it waits this long after the last phase).
EXPIRES_IN_S = 10.0
NAMESPACE = uuid.UUID("5d0c7f53-0a5e-4a57-9b4c-3f1f6f3e9a21")
PHASES = (("no load telemetry (floor)", 0.0), ("90 %", 0.9), ("200 %", 2.0))
ACTOR_ENV = "HEARTH_DEVICE_ACTOR_COALESCE_AFTER"


@dataclass(frozen=True)
class MixedBench:
    """Commands under telemetry load: the highest telemetry rate the actor sustains (found in the run),
    then 90 % and 200 % of it, each with commands from the API and from automations (temporary servers)."""

    devices: int = option(10_000, "Load thermostats the telemetry is spread over")
    commanded: int = option(200, "Simulated thermostats for the API's commands (as many for automations')")
    command_rate: float = option(100.0, "Commands/s from the API, and as many from automations")
    search_from: float = option(5_000.0, "Telemetry readings/s the search starts at")
    search_factor: float = option(1.25, "Each search step offers this many times the rate before")
    search_max: float = option(200_000.0, "The search stops here")
    search_duration: float = option(20.0, "Seconds of each search step")
    duration: float = option(60.0, "Seconds of each phase")
    simulator_rate: float = option(0.05, "The simulated thermostats' own reports/s each")
    coalesce_after: int | None = option(None, "The actor's COALESCE_AFTER in the phases (default: its own)")


@dataclass
class Fleet:
    """Who is who: the devices of each kind, and the next ``device_seq`` each group sends from."""

    triggers: int
    load: int
    api_devices: list[str]
    automation_devices: list[str]
    seq: dict[str, int] = field(default_factory=lambda: {"triggers": 2, "load": 2})  # 1: the calm first

    @property
    def trigger_rate(self) -> float:
        """The trigger thermostats' readings/s: each reads hot and calm once in ``TRIGGER_PERIOD_S``."""
        return 2 * self.triggers / TRIGGER_PERIOD_S

    def take(self, group: str, readings: float) -> range:
        """The next ``device_seq`` rounds of a group for ``readings`` readings (at least one round)."""
        devices = self.triggers if group == "triggers" else self.load
        rounds = range(self.seq[group], self.seq[group] + max(1, round(readings / devices)))
        self.seq[group] = rounds.stop
        return rounds


@dataclass
class Phase:
    name: str
    rate: float  # readings/s offered in all (load and triggers)
    rounds: dict[str, range]  # device_seq rounds each group sent
    sent: dict[str, int] = field(default_factory=dict)
    late_s: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    lags: list[int] = field(default_factory=list)
    coalesced: int = 0
    late: int = 0  # state reports the actor got after a newer one of their device (no fact)
    cpu: dict[str, float] = field(default_factory=dict)
    api: dict[uuid.UUID, dict[str, float]] = field(default_factory=dict)
    http: dict[str, int] = field(default_factory=dict)
    window: tuple[float, float] = (0.0, 0.0)  # wall clock: the phase's start, and when it settled
    quiet_after_s: float | None = None  # the wait for a quiet machine before it (None: never quiet)


def _phase(name: str, rate: float, fleet: Fleet, duration_s: float) -> Phase:
    """A phase or search step of ``rate`` readings/s in all: the trigger readings (which make the
    automations' commands) and, above their rate, the load's."""
    rate = max(fleet.trigger_rate, rate)
    rounds = {"triggers": fleet.take("triggers", fleet.trigger_rate * duration_s)}
    if rate > fleet.trigger_rate:
        rounds["load"] = fleet.take("load", (rate - fleet.trigger_rate) * duration_s)
    return Phase(name, rate, rounds)


def _automations(fleet: Fleet) -> list[Automation]:
    """One per trigger thermostat ``k``: hot -> a new target on simulated thermostat ``k // 2 % n``.

    Trigger ``k`` is hot in every other round (``reading(seq, 2, k)``: even ``k`` in even rounds, odd in
    odd ones) and the thermostats of a round are read in ``k`` order, so a simulated thermostat hears from
    its automations evenly, one every ``n / command_rate`` s, in the order ``(k // 2n, k % 2)`` takes;
    each of those has a target of its own (up to 12), so no command repeats the one before it."""
    now, n = utcnow(), len(fleet.automation_devices)
    found = []
    for k in range(fleet.triggers):
        target = 18.0 + 0.5 * ((k // 2 // n * 2 + k % 2) % 12)
        act = CommandAction(
            device_id=fleet.automation_devices[k // 2 % n],
            name="set_target_temperature",
            params={"target_c": target},
        )
        found.append(
            Automation(
                automation_id=uuid.uuid5(NAMESPACE, f"automation {k}"),
                home_id=HOME,
                name=f"{device_id(k)} hot",
                trigger=Trigger(state=StateTest(device_id=device_id(k), key="ambient_c", above=THRESHOLD_C)),
                actions=(Action(command=act),),
                mode="parallel",
                created_at=now,
            )
        )
    return found


async def _register(stack: BenchStack, fleet: Fleet) -> None:
    """The trigger thermostats (in ``HOME``) and the load (homes of ``HOME_SIZE``) on the command lane,
    and the automations on the home journal."""
    topics = stack.settings.topics
    producer = make_producer(stack.settings.kafka_bootstrap_servers, "bench-mixed-setup", linger_ms=20)
    await producer.start()
    try:
        now = utcnow()
        for i in range(fleet.triggers + fleet.load):
            home = HOME if i < fleet.triggers else f"bench-mixed-{(i - fleet.triggers) // HOME_SIZE:06d}"
            request = RegisterDevice(
                request_id=new_id(), device_id=device_id(i), sent_at=now, home_id=home,
                device_type="thermostat", name=device_id(i),
            )  # fmt: skip
            await producer.send(topics.lane_of(request), encode(request), key=device_id(i).encode())
        for fact in created_facts(_automations(fleet)):
            await producer.send(topics.home_journal, encode_home_fact(fact), key=fact.home_id.encode())
        await producer.flush()
    finally:
        await producer.stop()


def _serving(stack: BenchStack) -> Serving:
    state = read_serving(serving_file(stack.services.data / "device-actor"))
    if state is None:
        raise RuntimeError("the device actor's serving file is missing")
    return state


def _lag(stack: BenchStack) -> int:
    return _serving(stack).lag.get(stack.settings.topics.inbox, 0)


def _sample_lag(stack: BenchStack, into: list[int], stop: threading.Event) -> None:
    """The telemetry lane's lag once a second until ``stop``: in a thread of its own, so that a sender
    that keeps the event loop busy does not thin the samples out."""
    while not stop.wait(1.0):
        into.append(_lag(stack))


async def _caught_up(stack: BenchStack) -> None:
    """Wait until both lanes have been at no lag for ``CALM_S`` (the stack's parts still running)."""

    def no_lag() -> bool:
        stack.check_running()
        lag = _serving(stack).lag
        return bool(lag) and not any(lag.values())

    await steadily(no_lag, "the device actor caught up", for_s=CALM_S, timeout_s=SETTLE_TIMEOUT_S)


async def _telemetry(stack: BenchStack, fleet: Fleet, phase: Phase) -> None:
    """The phase's readings: the load's and the triggers', each group from its own producer."""
    senders = {
        "triggers": send_readings(
            stack.settings, fleet.triggers, phase.rounds["triggers"], fleet.trigger_rate, 2
        )
    }
    if "load" in phase.rounds:
        load_rate = phase.rate - fleet.trigger_rate
        rounds = phase.rounds["load"]
        senders["load"] = send_readings(
            stack.settings, fleet.load, rounds, load_rate, NEVER, first=fleet.triggers
        )
    done = await asyncio.gather(*senders.values())
    for group, (late, sent) in zip(senders, done, strict=True):
        phase.late_s[group], phase.sent[group] = round(late, 3), sent


async def _commands(client: LeanHttp, fleet: Fleet, phase: Phase, rate: float, duration_s: float) -> None:
    """``rate`` API commands a second, a new target each, round robin over the API's thermostats."""
    devices = fleet.api_devices

    async def command(i: int, due: float) -> None:
        target = 18.0 + ((i // len(devices) + i) % 9) * 0.5  # never the device's last target
        try:
            response = await client.request(
                "POST",
                f"/v1/devices/{devices[i % len(devices)]}/commands",
                json={
                    "name": "set_target_temperature",
                    "params": {"target_c": target},
                    "expires_in_s": EXPIRES_IN_S,
                },
            )
        except LEAN_ERRORS as error:
            key = f"error {type(error).__name__}"
        else:
            key = f"HTTP {response.status_code}"
            if response.status_code == 202:
                phase.api[uuid.UUID(response.json()["command_id"])] = {}
        phase.http[key] = phase.http.get(key, 0) + 1

    await paced(rate, duration_s, command)


async def _run_phase(
    stack: BenchStack, fleet: Fleet, phase: Phase, client: LeanHttp, args: MixedBench, duration_s: float
) -> None:
    """One phase or search step: telemetry and the API's commands for ``duration_s``, then caught up."""
    await _caught_up(stack)
    phase.quiet_after_s = await stack.quiet()
    before, cpu_before = _serving(stack), stack.cpu_seconds()
    began, wall = time.monotonic(), time.time()
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_lag, args=(stack, phase.lags, stop), daemon=True)
    sampler.start()
    try:
        await asyncio.gather(
            _telemetry(stack, fleet, phase), _commands(client, fleet, phase, args.command_rate, duration_s)
        )
        phase.seconds = time.monotonic() - began
    finally:
        stop.set()
        sampler.join()
    phase.cpu = cpu_share(cpu_before, stack.cpu_seconds(), phase.seconds)
    stack.check_running()
    await _caught_up(stack)
    after = _serving(stack)
    phase.coalesced = after.coalesced_reports - before.coalesced_reports
    phase.late = after.late_reports - before.late_reports
    phase.window = (wall, time.time())


async def _search(
    stack: BenchStack, fleet: Fleet, client: LeanHttp, args: MixedBench
) -> tuple[float, list[dict[str, Any]]]:
    steps, found = [], []
    for rate in search_rates(args.search_from, args.search_factor, args.search_max):
        step = _phase(f"search {rate:g}/s", rate, fleet, args.search_duration)
        console.print(
            f"search: {rate:,.0f} readings/s for ~{args.search_duration:g} s, "
            f"{args.command_rate:g} commands/s x 2, coalescing off"
        )
        await _run_phase(stack, fleet, step, client, args, args.search_duration)
        achieved = sum(step.sent.values()) / step.seconds
        kept_up = sustained(step.lags, achieved)
        verdict = "sustained" if kept_up else "not sustained"
        console.print(f"  sent {achieved:,.0f}/s; lag samples {step.lags}; {verdict}")
        steps.append((achieved, kept_up))
        found.append({
            "offered_per_s": rate, "achieved_per_s": round(achieved), "sender_late_s": step.late_s,
            "lag_records": step.lags, "sustained": kept_up, "cpu_percent_of_one_core": step.cpu,
            "quiet_after_s": step.quiet_after_s,
        })  # fmt: skip
        if not kept_up or sender_short(rate, achieved):
            break
    ceiling = highest_sustained(steps)
    if ceiling is None:
        raise RuntimeError(f"not even {args.search_from:g} readings/s was sustained: lower --search-from")
    return ceiling, found


def _restart_actor(stack: BenchStack, env: dict[str, str]) -> None:
    """The device actor again, with ``env`` over the stack's (same data directory: it recovers its twins)."""
    stack.parts["device-actor"].stop()
    stack.services.extra_env = {k: v for k, v in {**stack.services.extra_env, **env}.items() if v}
    process, timeout_s = stack.services.part("device-actor")
    stack.parts["device-actor"] = process
    process.start()
    process.wait_healthy(timeout_s * 2)


class _Reported(msgspec.Struct):
    device_seq: int
    device_time: datetime


class _StateFact(msgspec.Struct):
    """The few fields of a ``device.state_reported`` fact the account needs (msgspec skips the rest)."""

    device_id: str
    recorded_at: datetime
    payload: _Reported


async def _read_reports(stack: BenchStack, fleet: Fleet, phases: list[Phase]) -> dict[str, dict[str, Any]]:
    """Per phase: the state facts of the bench's own thermostats (by device and ``device_seq``), each
    load reading's sent -> fact, and the simulated thermostats' reports on the telemetry lane (by their
    ``sent_at`` in the phase's window) and their facts: the actor's coalesced count is of every device's."""
    group_of = {
        device_id(i): ("triggers" if i < fleet.triggers else "load")
        for i in range(fleet.triggers + fleet.load)
    }
    found: dict[str, dict[str, Any]] = {
        p.name: {"facts": 0, "lag_s": [], "simulated_sent": 0, "simulated_facts": 0} for p in phases
    }
    simulated = await _simulated_reports(stack, phases)
    for name in simulated.values():
        found[name]["simulated_sent"] += 1
    decoder, marker = msgspec.json.Decoder(_StateFact), b'"type":"device.state_reported"'
    async for value in read_topic(stack.settings, stack.settings.topics.journal):
        if marker not in value[:40]:
            continue
        fact = decoder.decode(value)
        group = group_of.get(fact.device_id)
        if group is None:
            if (sent_in := simulated.get((fact.device_id, fact.payload.device_seq))) is not None:
                found[sent_in]["simulated_facts"] += 1
            continue
        for phase in phases:
            if fact.payload.device_seq in phase.rounds.get(group, ()):
                found[phase.name]["facts"] += 1
                if group == "load":
                    found[phase.name]["lag_s"].append(
                        (fact.recorded_at - fact.payload.device_time).total_seconds()
                    )
    return found


async def _simulated_reports(stack: BenchStack, phases: list[Phase]) -> dict[tuple[str, int], str]:
    """The simulated thermostats' reports on the telemetry lane, (device, seq) -> the phase it was sent in."""
    simulated = {}
    async for value in read_topic(stack.settings, stack.settings.topics.inbox):
        if OWN_DEVICES in value:
            continue
        request = decode_inbound(value)
        if isinstance(request, ReportState):
            at = request.sent_at.timestamp()
            for phase in phases:
                if phase.window[0] <= at <= phase.window[1]:
                    simulated[(request.device_id, request.device_seq)] = phase.name
    return simulated


def _summary(
    phase: Phase, reports: dict[str, Any], automation: dict[uuid.UUID, dict[str, float]], fleet: Fleet
) -> dict[str, Any]:
    start, end = phase.window
    mine = [t for t in automation.values() if start <= t.get("submitted", 0.0) <= end]
    triggers = sum(
        1
        for seq in phase.rounds.get("triggers", ())
        for i in range(fleet.triggers)
        if reading(seq, 2, i) == HOT_C
    )
    sent = sum(phase.sent.values())
    return {
        "phase": phase.name,
        "telemetry_offered_per_s": round(phase.rate),
        "telemetry_sent_per_s": round(sent / phase.seconds),
        "sender_late_s": phase.late_s,
        "seconds": round(phase.seconds, 1),
        "quiet_after_s": phase.quiet_after_s,
        "api": command_figures(phase.api.values()),
        "api_http": phase.http,
        "automations": command_figures(mine),
        "automation_triggers_sent": triggers,
        "telemetry_lag_records": {"max": max(phase.lags, default=0), "samples": phase.lags},
        "reading_to_fact_ms": latency_ms(reports["lag_s"]),
        "readings": reading_account(
            sent + reports["simulated_sent"],
            reports["facts"] + reports["simulated_facts"],
            phase.coalesced,
            phase.late,
        ),
        "simulated_reports": reports["simulated_sent"],
        "cpu_percent_of_one_core": phase.cpu,
    }


def _rows(s: dict[str, Any], floor: dict[str, Any]) -> list[dict[str, Any]]:
    name = f"{s['phase']} ({s['telemetry_sent_per_s']:,}/s)"
    rows = [
        latency_row(f"{name}: {who} command requested -> {point}", s[group][key], floor[group][key])
        for who, group in (("API", "api"), ("automation", "automations"))
        for point, key in (("dispatched", "to_dispatched_ms"), ("converged", "to_converged_ms"))
    ]
    if not s["reading_to_fact_ms"]["count"]:
        return rows  # no load telemetry
    lag = latency_row(f"{name}: load reading sent -> fact recorded", s["reading_to_fact_ms"], ratios=False)
    return [*rows, lag]


def _goal(what: str, figures: dict[str, float], goal_ms: float) -> str:
    p99 = figures.get("p99")
    verdict = "met" if p99 is not None and p99 < goal_ms else "NOT met"
    return f"{what} p99 {p99} ms (goal < {goal_ms:g}: {verdict})"


def _goals(phases: list[dict[str, Any]]) -> str:
    """The issue's goals, each met or not, plainly."""
    by_name = {p["phase"]: p for p in phases}
    said = []
    for name, dispatched, converged in (("90 %", 100, 250), ("200 %", 250, None)):
        p = by_name[name]
        for group in ("api", "automations"):
            text = f"{name}, {group}: " + _goal("dispatched", p[group]["to_dispatched_ms"], dispatched)
            if converged is not None:
                text += ", " + _goal("converged", p[group]["to_converged_ms"], converged)
            said.append(text)
        account = p["readings"]
        unfinished = p["api"]["unfinished"] + p["automations"]["unfinished"]
        said.append(
            f"{name}: {account['sent']:,} readings sent, {account['facts']:,} facts, "
            f"{account['coalesced']:,} coalesced, {account['late']:,} overtaken whole by newer reports "
            f"or redelivered (no fact), {account['unaccounted']:,} unaccounted; "
            f"{unfinished:,} commands without a terminal status"
        )
    return "; ".join(said) + "."


def run_mixed_bench(args: MixedBench) -> dict[str, Any]:
    env = {
        ACTOR_ENV: "0",
        "HEARTH_SIMULATOR_RATE": str(args.simulator_rate),
        "HEARTH_AUTOMATIONS_COMMAND_EXPIRES_IN_S": str(EXPIRES_IN_S),
    }
    services = ("device-actor", "projector", "query-api", "command-api", "automations", "simulator")
    triggers = round(args.command_rate * TRIGGER_PERIOD_S)
    with bench_stack("mixed", services=services, env=env) as stack:

        async def prepare() -> Fleet:
            simulated = await stack.register_thermostats(HOME, 2 * args.commanded)
            fleet = Fleet(triggers, args.devices, simulated[: args.commanded], simulated[args.commanded :])
            await _register(stack, fleet)
            console.print("every thermostat reads once (calm): online")
            await send_readings(stack.settings, triggers + args.devices, range(1, 2), args.search_from, NEVER)
            await stack.wait_listed(HOME, 2 * args.commanded + triggers, online=True)
            return fleet

        def api_client() -> LeanHttp:
            headers = {"Authorization": f"Bearer {stack.token()}"}
            return LeanHttp(stack.command_api, connections=CONNECTIONS, headers=headers)

        async def search(fleet: Fleet) -> tuple[float, list[dict[str, Any]]]:
            async with api_client() as client:
                return await _search(stack, fleet, client, args)

        async def phases(fleet: Fleet, ceiling: float) -> list[dict[str, Any]]:
            done = []
            async with api_client() as client:
                for name, share in PHASES:
                    phase = _phase(name, share * ceiling, fleet, args.duration)
                    console.print(
                        f"phase {name}: {phase.rate:,.0f} readings/s, {args.command_rate:g} commands/s x 2"
                    )
                    await _run_phase(stack, fleet, phase, client, args, args.duration)
                    done.append(phase)
            console.print(f"waiting {EXPIRES_IN_S + CALM_S:g} s: every command converged or expired")
            await asyncio.sleep(EXPIRES_IN_S + CALM_S)
            console.print("reading the command lane and the journal back")
            times = {k: v for p in done for k, v in p.api.items()}  # the API's; the automations' adopted
            for_automations = set(fleet.automation_devices)

            def adopt(request: SubmitCommand) -> bool:
                return request.device_id in for_automations

            await mark_commands(stack, times, adopt)
            automation = {k: v for k, v in times.items() if not any(k in p.api for p in done)}
            reports = await _read_reports(stack, fleet, done)
            return [_summary(p, reports[p.name], automation, fleet) for p in done]

        fleet = asyncio.run(prepare())
        ceiling, steps = asyncio.run(search(fleet))
        console.print(
            f"ceiling: {ceiling:,.0f} readings/s sustained; restarting the actor with coalescing on"
        )
        _restart_actor(stack, {ACTOR_ENV: str(args.coalesce_after or "")})
        summaries = asyncio.run(phases(fleet, ceiling))
    floor = summaries[0]
    return {
        "title": "commands under telemetry load (90 % and 200 % of the sustained rate)",
        **dataclasses.asdict(args),
        "trigger_thermostats": triggers,
        "ceiling_per_s": round(ceiling),
        "search": steps,
        "phases": summaries,
        "rows": [row for s in summaries for row in _rows(s, floor)],
        "notes": _notes(args, ceiling, steps, summaries),
    }


def _notes(
    args: MixedBench, ceiling: float, steps: list[dict[str, Any]], phases: list[dict[str, Any]]
) -> str:
    last = steps[-1]
    limit = (
        f"the search stopped at {last['offered_per_s']:,.0f}/s offered ({last['achieved_per_s']:,}/s sent), "
        "where the lag grew"
        if not last["sustained"]
        else f"every step up to --search-max was sustained: {ceiling:,.0f}/s is a lower bound"
    )
    if last["sustained"] and sender_short(last["offered_per_s"], last["achieved_per_s"]):
        limit = (
            f"the search stopped at {last['offered_per_s']:,.0f}/s offered, where the bench's sender "
            f"reached only {last['achieved_per_s']:,}/s: the ceiling is the client's, a lower bound of the "
            "actor's"
        )
    short = "".join(
        f"In the {p['phase']} phase the bench's senders offered {p['telemetry_offered_per_s']:,}/s but sent "
        f"{p['telemetry_sent_per_s']:,}/s: the phase ran below its share. "
        for p in phases
        if sender_short(p["telemetry_offered_per_s"], p["telemetry_sent_per_s"])
    )
    cpu = "; ".join(
        f"{p['phase']}: " + ", ".join(f"{k} {v:.0f}" for k, v in p["cpu_percent_of_one_core"].items())
        for p in phases
    )
    return (
        f"Ceiling: {ceiling:,.0f} telemetry readings/s sustained by one device-actor worker with coalescing "
        f"off, while it served the phases' commands ({limit}; a step of {args.search_duration:g} s is "
        "sustained when the telemetry lane stays within 1 s of readings behind in its second half). Phases "
        f"of {args.duration:g} s, coalescing on ({_threshold(args)}): {args.command_rate:g} API commands/s "
        f"(`set_target_temperature`, no wait, round robin over {args.commanded:,} simulated thermostats) and "
        f"{args.command_rate:g} automation commands/s (made by the trigger thermostats' hot readings, "
        f"onto {args.commanded:,} others), with load telemetry over {args.devices:,} thermostats straight "
        "onto the inbox's telemetry lane. Requested = the request's `sent_at` (command API or automations "
        "service); dispatched, converged = the actor's `recorded_at`. The floor: the same commands with no "
        "load telemetry. " + short + "Goals (issue 21): " + _goals(phases) + f" CPU in % of one core: {cpu}."
    )


def _threshold(args: MixedBench) -> str:
    if args.coalesce_after is None:
        return "the actor's default threshold"
    return f"threshold {args.coalesce_after:,} records per partition"


def main(params: MixedBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    result = run_mixed_bench(params)
    path = write_result("mixed", result)
    console.print(f"mixed: ceiling {result['ceiling_per_s']:,}/s; {path}")
    return result
