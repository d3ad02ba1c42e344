"""A command never waits behind telemetry (issue 21, the contract's "Commands before telemetry").

A device-actor worker starts with a backlog: thousands of state reports on the telemetry lane, and one
command sent after all of them on the command lane. The command is decided within the worker's first
batches, ahead of almost all of its own device's reports, and every report is still decided after it
(nothing dropped). The control sends the same command on the telemetry lane, as the single inbox did
before the lanes: it is decided behind its device's whole backlog, so the check can fail. The measure is
an order in the journal, not a time, so the machine's speed does not decide the outcome.

Fetched together, the command still comes first. The worker's first fetch brings both lanes in one
answer, its partitions in the order aiokafka shuffled them into the request; a round that waited for
it once got a whole batch of the commanded device's readings back before the command (about 1 run in
50: telemetry first, and the device's partition first of it, with at most one other device on it). The
test below that fixes that order meets it in every run.

A command that comes while a batch of telemetry is decided is decided before the rest of that batch:
the test sends it as the worker begins to decide one device's 12,000 readings, fetched in one round, and
it is decided ahead of most of them; the control, a worker that never looks for commands meanwhile,
decides it after all of them.

Overload: the same backlog read by a worker told to coalesce once a partition is 100 records behind
folds reports, and the count is exact: the facts recorded plus the reports coalesced are the reports
sent, and each twin ends at its newest report.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.consumer import fetcher

from hearth_device_actor.service.actor import InboxRecord
from hearth_device_actor.settings import DeviceActorSettings
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import CommandRequested, Event, Inbound, StateReported, SubmitCommand, encode
from tests.support.inbox_requests import command_request, register_request, report_request
from tests.support.inbox_worker import Worker, submit
from tests.support.topics import read_journal
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

DEVICES = 24  # two per partition
REPORTS = 300  # per device: 7,200 reports of backlog
BATCH = 200  # records a worker round takes: the backlog is 36 rounds
LONG_BATCH = 12_000  # one device's readings, fetched in one round (3 MB: under one fetch's 4 MB a partition)


async def registered_fleet(
    settings: StackSettings, count: int = DEVICES
) -> tuple[list[str], dict[bytes, bytes]]:
    """``count`` thermostats registered through a worker that then committed: (their ids, the changelog)."""
    devices = [f"lane-{uuid.uuid4().hex[:6]}-{i}" for i in range(count)]
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


async def reports_before_the_command(
    settings: StackSettings, *, on_its_lane: bool, fleet: int = DEVICES
) -> tuple[int, int]:
    """(reports of the commanded device decided before its command, its reports decided in all)."""
    devices, changelog = await registered_fleet(settings, fleet)
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


def lane_first(topic: str) -> Callable[[list[tuple[TopicPartition, int]]], None]:
    """In place of the shuffle of a fetch request's partitions (aiokafka ``Fetcher._get_actions_per_node``:
    the broker answers in the request's order, and ``getmany`` drains its buffer in the answer's order):
    ``topic``'s partitions first."""

    def order(partitions: list[tuple[TopicPartition, int]]) -> None:
        partitions.sort(key=lambda fetch: fetch[0].topic != topic)

    return order


async def test_a_command_sent_after_a_telemetry_backlog_is_decided_ahead_of_it(stack: StackSettings) -> None:
    before, reports = await reports_before_the_command(stack, on_its_lane=True)
    assert reports == REPORTS, "every report is still decided"
    assert before < REPORTS // 4, f"the command waited behind {before} of its device's {REPORTS} reports"


async def test_a_command_fetched_with_telemetry_is_decided_before_any_of_it(
    stack: StackSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One device, so its readings and its command come back in the worker's first fetch, in the order
    that once failed the test above by chance: telemetry first. A round that waited for that fetch gets
    200 of the device's readings back, and the command, fetched with them, must still be decided before
    any of them."""
    monkeypatch.setattr(fetcher, "random", SimpleNamespace(shuffle=lane_first(stack.topics.inbox)))
    before, reports = await reports_before_the_command(stack, on_its_lane=True, fleet=1)
    assert reports == REPORTS
    assert before == 0, f"the command, fetched with them, waited behind {before} of its device's reports"


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


async def reports_before_a_command_sent_mid_batch(settings: StackSettings, check_commands_s: float) -> int:
    """One device's ``LONG_BATCH`` readings, fetched by the worker in one round; the command sent as the
    worker begins to decide them: how many of them were decided before it."""
    (device,), changelog = await registered_fleet(settings, 1)
    backlog = [report_request(device, seq, ambient_c=20.0 + seq / 1000) for seq in range(1, LONG_BATCH + 1)]
    await submit(settings, backlog)
    command = command_request(
        device, "set_target_temperature", {"target_c": 22.5}, home_id="lane", expires_in_s=3600
    )
    worker = Worker(
        settings, changelog, catch_up=True, batch_size=LONG_BATCH, check_commands_s=check_commands_s
    )
    decide = worker.actors.handle_batch
    sent = False

    async def sending_the_command_first(records: list[InboxRecord], **options: Any) -> None:
        nonlocal sent
        if options.get("commands_meanwhile") is not None and not sent:  # the telemetry batch
            sent = True
            await submit(settings, [command])
        await decide(records, **options)

    worker.feed.handle = sending_the_command_first
    await worker.start()
    try:
        await worker.handled(len(backlog) + 1)
    finally:
        await worker.stop()
    assert sent, "no batch of telemetry was decided"
    facts = [e for e in await read_journal(settings) if e.device_id == device]
    assert sum(isinstance(e, StateReported) for e in facts) == LONG_BATCH, "every report is decided"
    return decided_before(facts, command)


async def test_a_command_that_comes_while_telemetry_is_decided_waits_for_little_of_it(
    stack: StackSettings,
) -> None:
    before = await reports_before_a_command_sent_mid_batch(stack, check_commands_s=0.02)
    assert before < LONG_BATCH // 2, (
        f"the command waited behind {before} of the batch's {LONG_BATCH} readings"
    )


async def test_a_worker_that_never_looks_meanwhile_decides_it_after_the_whole_batch(
    stack: StackSettings,
) -> None:
    before = await reports_before_a_command_sent_mid_batch(stack, check_commands_s=3600)
    assert before == LONG_BATCH, "the command was not sent while the batch was decided: the test is blind"


async def test_an_idle_worker_fetches_seldom_and_a_command_still_comes_through(
    stack: StackSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle (a round fetched nothing), the worker's fetches are held ``idle_fetch_wait_ms`` at the broker,
    not ``fetch_wait_ms``: a worker doing nothing sent one every 20 ms. A command then still comes
    through (a held fetch comes back at its first record), and its round sets the short wait again."""
    devices, changelog = await registered_fleet(stack, 2)
    waits = DeviceActorSettings()
    sent: list[int] = []  # the wait of each fetch the worker's inbox consumer sent
    proc_fetch_request = fetcher.Fetcher._proc_fetch_request

    async def counted(self: Any, assignment: Any, node_id: int, request: Any) -> Any:
        if self is worker.feed.consumer._fetcher:
            sent.append(request._max_wait_ms)
        return await proc_fetch_request(self, assignment, node_id, request)

    monkeypatch.setattr(fetcher.Fetcher, "_proc_fetch_request", counted)
    worker = Worker(stack, changelog, catch_up=True)
    await worker.start()
    try:
        await eventually(lambda: waits.idle_fetch_wait_ms in sent, "a fetch held as idle")
        before = len(sent)
        await asyncio.sleep(2.0)
        idle = sent[before:]
        assert len(idle) <= 2.0 / (waits.idle_fetch_wait_ms / 1000) + 2, f"{len(idle)} fetches in 2 s idle"
        assert set(idle) == {waits.idle_fetch_wait_ms}, idle

        command = command_request(devices[0], "set_target_temperature", {"target_c": 21.0}, home_id="lane")
        await submit(stack, [command])
        await worker.handled(worker.actors.processed + 1)
        await eventually(lambda: waits.fetch_wait_ms in sent[before + len(idle) :], "a fetch held as busy")
    finally:
        await worker.stop()
