"""Weeks of simulated households written straight into a journal, as the device path would have written them
(``hearth bench learn``'s history).

The messages are the simulator's own (``hearth_simulator.history.History``: occupants, outdoor, room
physics, the very MQTT payloads ``hearth simulate --history`` publishes). Each goes the way a device's
message goes, through the same pure functions, without the processes in between: the device gateway's edge
(``hearth_device_gateway.service.edge.translate``: the topic and payload -> a ``ReportState`` request with
its derived id), then the device actor's ``decide`` -> ``stamp`` -> ``evolve`` on the device's twin (the
registration first, ``simulated`` as ``hearth simulate`` registers them). The facts are appended with
``hearth_devstack.workload.journal_facts.fill_journal``: keyed and partitioned by device id, as the actor
appends them. So the journal holds the facts the MQTT path would have (the actor's anomaly scoring aside:
the learner reads no anomaly), with ``recorded_at`` the time of writing.

Why not through MQTT: the history writer is capped at 3,000 reports a second (history_writer.py: faster
than one actor decides, the actor coalesces a device's reports and loses the device times of manual
changes), and 6 weeks of 1,000 homes are about 5.9 million reports, 33 minutes at the cap on top of
making them. Written here, the pace is the simulation's (about 30 ms per thermostat-day on one core), on
``workers`` processes, each writing its own homes (a device's facts stay in one process, in order).

A day of simulated time (24 of the history's hourly slices, every room's) is appended at a time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing import get_context
from typing import Any, TypeVar

from hearth_bench.figures.learn_figures import Span
from hearth_device_gateway.service.edge import translate
from hearth_devstack.workload.journal_facts import fill_journal
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain.decide import decide, stamp
from hearth_shared.domain.evolve import evolve
from hearth_shared.domain.thermostat import TYPE as THERMOSTAT
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import Event, Inbound, RegisterDevice, new_id
from hearth_simulator.history import HISTORY_SEQ_LEAD, History, Home, Record

SLICES_PER_WRITE = 24  # hours of simulated time appended at once
R = TypeVar("R")


@dataclass(frozen=True)
class HistoryWritten:
    """What was appended: facts (registrations, readings, the actor's connectivity facts), the devices'
    reports among them, the manual changes made, and the seconds it took."""

    facts: int
    reports: int
    manual_changes: int
    seconds: float


def homes_of(prefix: str, count: int) -> list[Home]:
    """``count`` homes of one thermostat each: ``{prefix}-0001`` with ``{prefix}-0001-thermostat-1``."""
    return [Home(f"{prefix}-{n:04d}", (f"{prefix}-{n:04d}-thermostat-1",)) for n in range(1, count + 1)]


class Twins:
    """The device actor's pure path for the history's devices: request -> facts, folded into each twin."""

    def __init__(self, homes: Sequence[Home]) -> None:
        self.home_of = {device_id: home.home_id for home in homes for device_id in home.thermostats}
        self.twins: dict[str, Twin | None] = dict.fromkeys(self.home_of)

    def registrations(self, now: datetime) -> list[Event]:
        facts: list[Event] = []
        for device_id, home_id in self.home_of.items():
            request = RegisterDevice(
                request_id=new_id(), device_id=device_id, sent_at=now, home_id=home_id,
                device_type=THERMOSTAT.name, name=device_id, simulated=True,
            )  # fmt: skip
            facts += self._decided(device_id, request, now)
        return facts

    def reports(self, records: Sequence[Record], now: datetime) -> list[Event]:
        facts: list[Event] = []
        for topic, payload in records:
            request = translate(topic, payload, now).request
            facts += self._decided(request.device_id, request, now)
        return facts

    def _decided(self, device_id: str, request: Inbound, now: datetime) -> list[Event]:
        twin = self.twins[device_id]
        events = stamp(
            twin, decide(twin, request, now), home_id=self.home_of[device_id], device_id=device_id,
            now=now, causation_id=request.request_id,
        )  # fmt: skip
        for event in events:
            twin = evolve(twin, event)
        self.twins[device_id] = twin
        return events


def _days(history: History) -> Iterator[list[Record]]:
    day: list[Record] = []
    for n, records in enumerate(history.slices(), start=1):
        day += records
        if n % SLICES_PER_WRITE == 0:
            yield day
            day = []
    if day:
        yield day


async def _append(settings: StackSettings, facts: list[Event]) -> None:
    if facts:
        await fill_journal(settings, iter(facts), len(facts))


def write_homes(homes: Sequence[Home], settings: StackSettings, span: Span, seed: int) -> HistoryWritten:
    """Make the homes' history over ``span`` and append its facts to the journal (one process's share)."""
    began = time.perf_counter()
    history = History(
        homes, span.start, span.end, seq_base=int(span.end * 1000) + HISTORY_SEQ_LEAD, seed=seed
    )
    twins = Twins(homes)
    facts = reports = 0

    async def run() -> None:
        nonlocal facts, reports
        registered = twins.registrations(datetime.now(UTC))
        await _append(settings, registered)
        facts += len(registered)
        for day in _days(history):
            decided = twins.reports(day, datetime.now(UTC))
            await _append(settings, decided)
            facts, reports = facts + len(decided), reports + len(day)

    asyncio.run(run())
    changes = sum(len(c) for c in history.manual_changes.values())
    return HistoryWritten(facts, reports, changes, time.perf_counter() - began)


def in_processes(work: Callable[..., R], homes: Sequence[Home], workers: int, *args: Any) -> list[R]:
    """``work(share, *args)`` for each of ``workers`` shares of ``homes`` (every n-th home), each share in
    a process of its own, spawned (a fresh interpreter: the caller may hold threads, a JVM, an event
    loop); in this process with one worker."""
    shares = [list(homes[i::workers]) for i in range(max(workers, 1)) if homes[i::workers]]
    if len(shares) <= 1:
        return [work(homes, *args)]
    with ProcessPoolExecutor(len(shares), mp_context=get_context("spawn")) as pool:
        running = [pool.submit(work, share, *args) for share in shares]
        return [r.result() for r in running]


def write_history(
    settings: StackSettings, homes: Sequence[Home], span: Span, *, seed: int, workers: int
) -> HistoryWritten:
    """Every home's history over ``span`` in the journal, the homes shared out over ``workers`` processes;
    the seconds are the wall time of the whole."""
    began = time.perf_counter()
    done = in_processes(write_homes, homes, workers, settings, span, seed)
    return HistoryWritten(
        facts=sum(d.facts for d in done),
        reports=sum(d.reports for d in done),
        manual_changes=sum(d.manual_changes for d in done),
        seconds=time.perf_counter() - began,
    )
