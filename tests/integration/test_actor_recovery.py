"""Recovery and scale of the device actor on the real broker.

* A worker killed with SIGKILL under load and started again: every twin comes back from the changelog
  (each device's facts go on from where they were, with no gap), no report is lost, and no fact is
  recorded twice (the successor catches its twins up with the journal first: catch_up.py).
* Two workers share the partitions; one is killed and the other takes over, then it rejoins (each
  reads the inbox partitions whose twins faust gave it, from the offsets the last owner committed).
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from hearth_devstack.local import Services
from hearth_devstack.supervision.process import ManagedProcess
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import (
    Event,
    RegisterDevice,
    ReportState,
    StateReported,
    encode,
    new_id,
    utcnow,
)
from tests.support.topics import read_journal
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

DEVICES = 60
REPORTS = 40  # per device


def worker(settings: StackSettings, tmp_path: Path, name: str) -> ManagedProcess:
    services = Services(
        settings,
        logs=tmp_path / name,
        data=tmp_path / f"{name}-data",
        extra_env={
            "HEARTH_DEVICE_ACTOR_SESSION_TIMEOUT_S": "6",
            "HEARTH_DEVICE_ACTOR_OFFLINE_AFTER_S": "3600",
        },
    )
    part, timeout_s = services.part("device-actor")
    part.start()
    part.wait_healthy(timeout_s)
    return part


async def play_fleet(
    settings: StackSettings, rate_per_s: float, halfway: asyncio.Event
) -> dict[str, dict[str, Any]]:
    """Register the devices, then send every report in order; returns each device's last state."""
    producer = make_producer(settings.kafka_bootstrap_servers, "recovery-fleet")
    await producer.start()
    last: dict[str, dict[str, Any]] = {}
    try:
        ids = [f"rec-{uuid.uuid4().hex[:6]}-{i}" for i in range(DEVICES)]
        for device_id in ids:
            request = RegisterDevice(
                request_id=new_id(),
                device_id=device_id,
                sent_at=utcnow(),
                home_id="rec",
                device_type="thermostat",
                name=device_id,
            )
            await producer.send(settings.topics.inbox, encode(request), key=device_id.encode())
        for seq in range(1, REPORTS + 1):
            for device_id in ids:
                state = {"ambient_c": 20.0 + (seq % 10) / 10, "humidity_pct": 40.0 + seq % 7}
                report = ReportState(
                    request_id=new_id(),
                    device_id=device_id,
                    sent_at=utcnow(),
                    device_seq=seq,
                    device_time=utcnow(),
                    state=state,
                )
                await producer.send(settings.topics.inbox, encode(report), key=device_id.encode())
                last[device_id] = state
            await asyncio.sleep(DEVICES / rate_per_s)
            if seq == REPORTS // 2:
                halfway.set()
        await producer.flush()
    finally:
        await producer.stop()
    return last


async def journal_with_reports(settings: StackSettings, reports: int, timeout_s: float) -> list[Event]:
    """The journal once it holds ``reports`` state reports, and a moment more (anything recorded twice by
    the restarted workers would land in it)."""

    seen: Counter[str] = Counter()  # reports in the journal per device, as of the last read

    async def all_in() -> bool:
        events = await read_journal(settings)
        seen.clear()
        seen.update(e.device_id for e in events if isinstance(e, StateReported))
        return seen.total() >= reports

    def shown() -> str:  # a failure says which devices fell short: one partition's, or all of them
        short = {device: n for device, n in seen.items() if n < reports // DEVICES}
        return f"{seen.total()} in all; devices short of {reports // DEVICES}: {short}"

    await eventually(
        all_in, f"{reports} reports in the journal", timeout_s=timeout_s, every_s=1.0, shown=shown
    )
    await asyncio.sleep(3)
    return await read_journal(settings)


async def kill_under_load(
    stack: StackSettings, tmp_path: Path, *, workers: int
) -> tuple[list[Event], dict[str, dict[str, Any]]]:
    """Run ``workers`` workers, SIGKILL the first halfway through the fleet's reports, start it again."""
    parts = [worker(stack, tmp_path, f"w{i}") for i in range(workers)]
    try:
        halfway = asyncio.Event()
        fleet = asyncio.create_task(play_fleet(stack, rate_per_s=600, halfway=halfway))
        await halfway.wait()
        victim = parts[0].proc
        assert victim is not None
        os.killpg(victim.pid, signal.SIGKILL)  # no goodbye: its partitions must be taken over
        victim.wait(10)
        if workers == 1:
            parts.append(worker(stack, tmp_path, "w0-again"))
        last = await fleet
        if workers > 1:
            parts.append(worker(stack, tmp_path, "w0-again"))  # rejoins and shares the partitions again
        return await journal_with_reports(stack, DEVICES * REPORTS, timeout_s=120), last
    finally:
        for part in parts:
            part.stop()


async def test_a_killed_worker_restarts_losing_and_doubling_nothing(
    stack: StackSettings, tmp_path: Path
) -> None:
    events, last = await kill_under_load(stack, tmp_path, workers=1)
    check_nothing_lost_or_doubled(events, last)


async def test_a_second_worker_takes_over_losing_and_doubling_nothing(
    stack: StackSettings, tmp_path: Path
) -> None:
    events, last = await kill_under_load(stack, tmp_path, workers=2)
    check_nothing_lost_or_doubled(events, last)


def check_nothing_lost_or_doubled(events: list[Event], last: dict[str, dict[str, Any]]) -> None:
    by_device: dict[str, dict[int, list[Event]]] = defaultdict(lambda: defaultdict(list))
    for event in events:
        by_device[event.device_id][event.version].append(event)
    assert len(by_device) == DEVICES
    for device_id, versions in by_device.items():
        assert sorted(versions) == list(range(1, max(versions) + 1)), f"{device_id}: a gap in its versions"
        doubled = sorted(v for v, copies in versions.items() if len(copies) > 1)
        assert not doubled, f"{device_id}: versions {doubled[:10]} recorded more than once"
        facts = [copies[0] for _, copies in sorted(versions.items())]
        reports = [e for e in facts if isinstance(e, StateReported)]
        assert [r.payload.device_seq for r in reports] == list(range(1, REPORTS + 1)), f"{device_id}: lost"
        reported: dict[str, Any] = {}
        for r in reports:
            reported.update(r.payload.reported)
        assert reported == last[device_id]
