"""The automations bench's live part: trigger fact -> ``command.dispatched`` fact, through real processes.

The device actor runs from the start (``bench_stack``); the bench registers the fleet's thermostats on
the inbox and puts the automations on the home journal, waits for the registrations in the journal, then
starts the automations service (it reads both journals to their ends before it says it is live). Every
device reports once (calm: that brings it online, so the actor dispatches its commands at once), then
readings go to the inbox at ``rate`` for ``duration`` seconds, round robin, one in ``cross_every`` hot.

A follower reads the journal as it is written. A hot reading's fact (found by device and sequence
number) names the command its automation must send: ``action_id(run_id(automation, fact id), 0)``. The
latency is that command's ``command.dispatched`` fact's ``recorded_at`` minus the trigger fact's, both
stamped by the actor: the engine's read of the journal, its decision, the request on the inbox and the
actor's decision. A trigger whose command is not dispatched within the wait counts as missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from datetime import datetime
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer

from hearth_bench.harness.load_client import cpu_share, latency_ms
from hearth_bench.harness.stack import BenchStack, console
from hearth_bench.load.automation_fleet import automations, created_facts, device_id, home_of, reading
from hearth_devstack.waiting import NotInTime
from hearth_shared.adapters.kafka import make_producer, topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain.automation import Automation, action_id, run_id
from hearth_shared.domain.home_facts import encode_home_fact
from hearth_shared.schema.events import RegisterDevice, ReportState, encode, new_id, utcnow


class _Payload(msgspec.Struct):
    device_seq: int | None = None
    command_id: uuid.UUID | None = None


class _Fact(msgspec.Struct):
    """The few fields of a journal fact the follower needs (msgspec skips the rest)."""

    type: str
    event_id: uuid.UUID
    device_id: str
    recorded_at: datetime
    payload: _Payload


class Follower:
    def __init__(self, settings: StackSettings, hot: dict[tuple[str, int], list[Automation]]) -> None:
        self.settings = settings
        self.hot = hot  # (device, seq) of each hot reading -> the automations it triggers
        self.registered = 0
        self.triggers: dict[uuid.UUID, datetime] = {}  # expected command -> its trigger fact's time
        self.dispatched: dict[uuid.UUID, datetime] = {}
        self.decoder = msgspec.json.Decoder(_Fact)

    def take(self, value: bytes) -> None:
        fact = self.decoder.decode(value)
        if fact.type == "device.registered":
            self.registered += 1
        elif fact.type == "device.state_reported" and fact.payload.device_seq is not None:
            for automation in self.hot.get((fact.device_id, fact.payload.device_seq), ()):
                command = action_id(run_id(automation.automation_id, fact.event_id), 0)
                self.triggers[command] = fact.recorded_at
        elif fact.type == "command.dispatched" and fact.payload.command_id is not None:
            self.dispatched[fact.payload.command_id] = fact.recorded_at

    async def run(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.kafka_bootstrap_servers, enable_auto_commit=False
        )
        await consumer.start()
        try:
            tps = await topic_partitions(consumer, self.settings.topics.journal)
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while True:
                for records in (await consumer.getmany(timeout_ms=200, max_records=20_000)).values():
                    for record in records:
                        self.take(record.value)
        finally:
            await consumer.stop()

    def latencies(self) -> tuple[list[float], int]:
        done = [
            (self.dispatched[c] - t).total_seconds() for c, t in self.triggers.items() if c in self.dispatched
        ]
        return done, len(self.triggers) - len(done)


async def send_readings(
    settings: StackSettings, devices: int, rounds: range, rate: float, cross: int, *, first: int = 0
) -> tuple[float, int]:
    """Readings ``rounds`` of every device (``device_id(first)`` onwards), round robin, straight onto the
    inbox's telemetry lane, paced at ``rate`` (in 10 ms slices); returns how late the latest slice
    started (s) and how many were sent."""
    producer = make_producer(settings.kafka_bootstrap_servers, "bench-readings", linger_ms=5)
    await producer.start()
    loop = asyncio.get_running_loop()
    began, sent, late = loop.time(), 0, 0.0
    try:
        total = devices * len(rounds)
        while sent < total:
            due = began + sent / rate
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            late = max(late, loop.time() - due)
            for n in range(sent, min(total, sent + max(1, int(rate / 100)))):
                i, seq = first + n % devices, rounds.start + n // devices
                now = utcnow()
                report = ReportState(
                    request_id=new_id(), device_id=device_id(i), sent_at=now, device_seq=seq, device_time=now,
                    state={"ambient_c": reading(seq, cross, i)},
                )  # fmt: skip
                await producer.send(settings.topics.inbox, encode(report), key=device_id(i).encode())
                sent += 1
        await producer.flush()
    finally:
        await producer.stop()
    return late, sent


async def _setup(settings: StackSettings, found: list[Automation], devices: int) -> None:
    producer = make_producer(settings.kafka_bootstrap_servers, "bench-setup", linger_ms=20)
    await producer.start()
    try:
        for fact in created_facts(found):
            await producer.send(
                settings.topics.home_journal, encode_home_fact(fact), key=fact.home_id.encode()
            )
        now = utcnow()
        for i in range(devices):
            request = RegisterDevice(
                request_id=new_id(), device_id=device_id(i), sent_at=now, home_id=home_of(i),
                device_type="thermostat", name=device_id(i),
            )  # fmt: skip
            await producer.send(settings.topics.inbox, encode(request), key=device_id(i).encode())
        await producer.flush()
    finally:
        await producer.stop()


def _rounds(args: dict[str, Any]) -> range:
    """The readings' rounds (a round: one reading of every device), after the first calm one."""
    return range(2, 2 + round(args["rate"] * args["duration"] / args["devices"]))


def check_rounds(args: dict[str, Any]) -> None:
    """Refuse a live part in which no reading would be hot (before anything starts)."""
    if len(_rounds(args)) < args["cross_every"]:
        raise ValueError(
            f"--rate x --duration / --devices gives {len(_rounds(args))} readings per device: give at "
            f"least --cross-every ({args['cross_every']}) so that some trigger"
        )


async def _measure(stack: BenchStack, args: dict[str, Any]) -> dict[str, Any]:
    settings, devices, cross = stack.settings, args["devices"], args["cross_every"]
    found = automations(args["automations"], devices, utcnow())
    rounds = _rounds(args)
    hot: dict[tuple[str, int], list[Automation]] = {}
    for k, automation in enumerate(found):
        i = k % devices  # the device it watches (automation_fleet.automations)
        for seq in rounds:
            if reading(seq, cross, i) > reading(seq - 1, cross, i):
                hot.setdefault((device_id(i), seq), []).append(automation)
    follower = Follower(settings, hot)
    following = asyncio.ensure_future(follower.run())
    sent, late, sending_s, unfinished = 0, 0.0, 0.0, ""
    try:
        await _setup(settings, found, devices)
        await stack.until(lambda: follower.registered >= devices, f"{devices:,} registrations", 300)
        part, timeout_s = stack.services.part("automations")
        stack.parts[part.name] = part  # stopped with the rest
        part.start()
        await asyncio.to_thread(part.wait_healthy, timeout_s * 2)
        await send_readings(settings, devices, range(1, 2), args["rate"], cross)  # online, calm
        before, began = stack.cpu_seconds(), time.monotonic()
        late, sent = await send_readings(settings, devices, rounds, args["rate"], cross)
        sending_s = time.monotonic() - began
        expected = sum(len(triggered) for triggered in hot.values())
        try:  # a platform that falls behind is a figure, not a failure: what arrived in time is measured
            await stack.until(lambda: len(follower.triggers) >= expected, f"{expected:,} trigger facts", 120)
            await stack.until(lambda: follower.latencies()[1] == 0, "every command dispatched", 60)
        except NotInTime as exc:
            unfinished = str(exc)
            console.print(f"[yellow]{exc}[/]")
        cpu = cpu_share(before, stack.cpu_seconds(), time.monotonic() - began)
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
    done, missing = follower.latencies()
    return {
        "readings_sent": sent,
        "readings_per_s_sent": round(sent / sending_s) if sending_s else 0,
        "sender_late_s": round(late, 3),
        "triggers": len(follower.triggers),
        "commands_missing": missing,
        "trigger_to_dispatched_ms": latency_ms(done),
        "cpu_pct_of_one_core": cpu,
        **({"unfinished": unfinished} if unfinished else {}),
    }


def measure_latency(stack: BenchStack, args: dict[str, Any]) -> dict[str, Any]:
    with console.status(f"live: readings at {args['rate']:,}/s for {args['duration']:g} s ..."):
        figures = asyncio.run(_measure(stack, args))
    console.print(f"trigger -> dispatched: {figures['trigger_to_dispatched_ms']}")
    return figures
