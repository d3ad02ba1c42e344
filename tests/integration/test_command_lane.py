"""A command never waits behind telemetry (issue 21, the contract's "Commands before telemetry").

A device-actor worker starts with a backlog: thousands of state reports on the telemetry lane, and one
command sent after all of them on the command lane. The command is decided within the worker's first
batches, ahead of almost all of its own device's reports, and every report is still decided after it
(nothing dropped). The control sends the same command on the telemetry lane, as the single inbox did
before the lanes: it is decided behind its device's whole backlog, so the check can fail. The measure is
an order in the journal, not a time, so the machine's speed does not decide the outcome.

Overload: the same backlog read by a worker told to coalesce once a partition is 100 records behind
folds reports, and the count is exact: the facts recorded plus the reports coalesced are the reports
sent, and each twin ends at its newest report.
"""

from __future__ import annotations

import uuid

import pytest

from hearth_shared.adapters.kafka import make_producer
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import CommandRequested, Event, Inbound, StateReported, SubmitCommand, encode
from tests.support.inbox_requests import command_request, register_request, report_request
from tests.support.inbox_worker import Worker, submit
from tests.support.topics import read_journal

pytestmark = pytest.mark.integration

DEVICES = 24  # two per partition
REPORTS = 300  # per device: 7,200 reports of backlog
BATCH = 200  # records a worker round takes: the backlog is 36 rounds


async def registered_fleet(settings: StackSettings) -> tuple[list[str], dict[bytes, bytes]]:
    """DEVICES thermostats registered through a worker that then committed: (their ids, the changelog)."""
    devices = [f"lane-{uuid.uuid4().hex[:6]}-{i}" for i in range(DEVICES)]
    changelog: dict[bytes, bytes] = {}
    registrar = Worker(settings, changelog, catch_up=True, batch_size=BATCH)
    await registrar.start()
    try:
        registered = [register_request(d, home_id="lane") for d in devices]
        await submit(settings, list(registered))
        await registrar.handled(len(registered))
        await registrar.commit()
    finally:
        await registrar.stop()
    return devices, changelog


def backlog_of(devices: list[str]) -> list[Inbound]:
    return [
        report_request(d, seq, ambient_c=20.0 + seq / 100) for seq in range(1, REPORTS + 1) for d in devices
    ]


async def reports_before_the_command(settings: StackSettings, *, on_its_lane: bool) -> tuple[int, int]:
    """(reports of the commanded device decided before its command, its reports decided in all)."""
    devices, changelog = await registered_fleet(settings)
    backlog = backlog_of(devices)
    await submit(settings, backlog)
    command = command_request(
        devices[0], "set_target_temperature", {"target_c": 22.5}, home_id="lane", expires_in_s=3600
    )
    await (submit(settings, [command]) if on_its_lane else on_telemetry(settings, command))

    worker = Worker(settings, changelog, catch_up=True, batch_size=BATCH)
    await worker.start()  # from the committed offsets: the backlog and the command
    try:
        await worker.handled(len(backlog) + 1)
    finally:
        await worker.stop()
    facts = [e for e in await read_journal(settings) if e.device_id == devices[0]]
    return decided_before(facts, command), sum(isinstance(e, StateReported) for e in facts)


def decided_before(facts: list[Event], command: SubmitCommand) -> int:
    """How many state reports of the device are in its journal before the command's first fact."""
    first = next(
        i
        for i, e in enumerate(facts)
        if isinstance(e, CommandRequested) and e.correlation_id == command.command_id
    )
    return sum(isinstance(e, StateReported) for e in facts[:first])


async def on_telemetry(settings: StackSettings, command: SubmitCommand) -> None:
    producer = make_producer(settings.kafka_bootstrap_servers, "lane-control")
    await producer.start()
    try:
        await producer.send_and_wait(settings.topics.inbox, encode(command), key=command.device_id.encode())
    finally:
        await producer.stop()


async def test_a_command_sent_after_a_telemetry_backlog_is_decided_ahead_of_it(stack: StackSettings) -> None:
    before, reports = await reports_before_the_command(stack, on_its_lane=True)
    assert reports == REPORTS, "every report is still decided"
    assert before < REPORTS // 4, f"the command waited behind {before} of its device's {REPORTS} reports"


async def test_on_the_telemetry_lane_the_same_command_waits_behind_the_backlog(stack: StackSettings) -> None:
    before, reports = await reports_before_the_command(stack, on_its_lane=False)
    assert reports == REPORTS
    assert before == REPORTS, "the control did not queue the command behind the backlog: the test is blind"


async def test_an_overloaded_worker_coalesces_reports_and_counts_every_one(stack: StackSettings) -> None:
    devices, changelog = await registered_fleet(stack)
    backlog = backlog_of(devices)
    await submit(stack, backlog)
    worker = Worker(stack, changelog, catch_up=True, batch_size=BATCH, coalesce_after=100)
    await worker.start()
    try:
        await worker.handled(len(backlog))
    finally:
        await worker.stop()
    recorded = [
        e for e in await read_journal(stack) if e.device_id in devices and isinstance(e, StateReported)
    ]
    coalesced = worker.actors.coalesced.reports
    assert coalesced > 0, "a backlog of 36 rounds never coalesced"
    assert len(recorded) + coalesced == len(backlog)
    for device_id in devices:
        twin = worker.actors.load(device_id)
        assert twin is not None and twin.last_device_seq == REPORTS
        assert twin.reported["ambient_c"] == 20.0 + REPORTS / 100
