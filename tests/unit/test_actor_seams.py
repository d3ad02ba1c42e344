"""The device actors through their seams: a fake ``Outbox`` and a fake clock, no broker.

What the hot path promises: facts numbered 1, 2, 3... per device and handed to the outbox once; twins
written only after the outbox has the facts; a redelivered batch decides nothing; deadlines fire from the
clock; an unreadable record is dead-lettered and the batch goes on; and a successor that caught up with
the journal (``catch_up``) decides nothing again for requests its predecessor already recorded.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from hearth_device_actor.service.actor import DeviceActors, InboxRecord, JournalGap
from hearth_shared.schema.events import (
    CommandDispatched,
    CommandExpired,
    CommandRejected,
    DeviceCameOnline,
    DeviceCommand,
    DeviceWentOffline,
    Event,
    Inbound,
    encode,
    wire_name,
)
from tests.support.fakes import FakeClock, FakeOutbox
from tests.support.inbox_requests import ack_request, command_request, register_request, report_request

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


def records(*requests: Inbound | bytes) -> list[InboxRecord]:
    return [
        InboxRecord("inbox", 0, offset, None, r if isinstance(r, bytes) else encode(r))
        for offset, r in enumerate(requests)
    ]


def actors(table: dict[bytes, bytes] | None = None) -> tuple[DeviceActors, FakeOutbox, FakeClock]:
    outbox, clock = FakeOutbox(), FakeClock(T0)
    return (
        DeviceActors({} if table is None else table, outbox, offline_after_s=60, clock=clock),
        outbox,
        clock,
    )


def versions(events: list[Event], device_id: str) -> list[int]:
    return [e.version for e in events if e.device_id == device_id]


async def test_facts_are_numbered_per_device_and_sent_once() -> None:
    a, outbox, _ = actors()
    batch = records(
        register_request("t1", at=T0),
        register_request("t2", at=T0),
        report_request("t1", 1, at=T0, ambient_c=20.0),
        command_request("t1", "set_target_temperature", {"target_c": 21.0}, at=T0),
    )
    await a.handle_batch(batch)
    assert versions(outbox.events, "t1") == list(range(1, len(versions(outbox.events, "t1")) + 1))
    assert versions(outbox.events, "t2") == [1]
    assert [c.name for c in outbox.commands] == ["set_target_temperature"]
    twin = a.load("t1")
    assert twin is not None and twin.version == max(versions(outbox.events, "t1"))


async def test_twins_are_written_only_once_the_outbox_has_the_facts() -> None:
    a, outbox, _ = actors()
    outbox.fail = True
    with pytest.raises(ConnectionError):
        await a.handle_batch(records(register_request("t1", at=T0)))
    assert a.load("t1") is None


async def test_a_redelivered_batch_decides_nothing() -> None:
    a, outbox, _ = actors()
    batch = records(
        register_request("t1", at=T0),
        report_request("t1", 1, at=T0, ambient_c=20.0),
        command_request("t1", "set_target_temperature", {"target_c": 21.0}, at=T0),
    )
    await a.handle_batch(batch)
    sent = len(outbox.events)
    await a.handle_batch(batch)
    assert len(outbox.events) == sent


async def test_deadlines_come_from_the_clock() -> None:
    a, outbox, clock = actors()
    await a.handle_batch(
        records(register_request("t1", at=T0), report_request("t1", 1, at=T0, ambient_c=20.0))
    )
    await a.handle_batch(
        records(command_request("t1", "set_target_temperature", {"target_c": 21.0}, at=T0, expires_in_s=30))
    )
    clock.now = T0 + timedelta(seconds=29)
    await a.tick()
    assert not any(isinstance(e, CommandExpired | DeviceWentOffline) for e in outbox.events)
    clock.now = T0 + timedelta(seconds=61)
    await a.tick()
    assert sum(isinstance(e, CommandExpired) for e in outbox.events) == 1
    assert sum(isinstance(e, DeviceWentOffline) for e in outbox.events) == 1
    await a.tick()  # nothing is due twice
    assert sum(isinstance(e, CommandExpired | DeviceWentOffline) for e in outbox.events) == 2


async def test_an_unreadable_record_is_dead_lettered_and_the_batch_goes_on() -> None:
    a, outbox, _ = actors()
    await a.handle_batch(records(b"\x00not json", register_request("t1", at=T0)))
    assert len(outbox.dead) == 1 and outbox.dead[0][0].offset == 0
    assert versions(outbox.events, "t1") == [1]


async def test_a_successor_caught_up_with_the_journal_decides_nothing_again() -> None:
    table: dict[bytes, bytes] = {}
    first, first_out, _ = actors(table)
    await first.handle_batch(
        records(register_request("t1", at=T0), report_request("t1", 1, at=T0, ambient_c=20))
    )
    at_commit = dict(table)  # the changelog at the last inbox commit
    again = records(
        report_request("t1", 2, at=T0, ambient_c=21.0),
        command_request("t1", "set_target_temperature", {"target_c": 22.0}, at=T0),
    )
    await first.handle_batch(again)  # recorded, then the worker dies before its commit
    successor, successor_out, _ = actors(at_commit)
    assert successor.catch_up(first_out.events) == 1  # one twin moved on
    assert successor.catch_up(first_out.events) == 0  # facts it has are not folded twice
    await successor.handle_batch(again)  # the uncommitted requests, read again
    assert successor_out.events == []
    assert successor.load("t1") == first.load("t1")
    assert any(isinstance(e, CommandDispatched) for e in first_out.events)


def lifecycle(events: list[Event], command_id: uuid.UUID) -> list[str]:
    """The command's lifecycle facts (``command.*``) in the order the actor sent them."""
    names = (wire_name(type(e)) for e in events if e.correlation_id == command_id)
    return [n for n in names if n.startswith("command.")]


async def test_a_command_is_tracked_from_request_to_convergence() -> None:
    a, outbox, clock = actors()
    await a.handle_batch(
        records(register_request("t1", at=T0), report_request("t1", 1, at=T0, ambient_c=19.0))
    )
    command = command_request("t1", "set_target_temperature", {"target_c": 21.5}, at=T0)
    await a.handle_batch(records(command))
    [dispatched] = outbox.commands
    assert (dispatched.command_id, dispatched.params) == (command.command_id, {"target_c": 21.5})
    await a.handle_batch(records(ack_request("t1", command.command_id)))
    assert lifecycle(outbox.events, command.command_id)[-1] == "command.acknowledged"
    clock.now = T0 + timedelta(seconds=5)
    await a.handle_batch(records(report_request("t1", 2, at=clock.now, target_c=21.5)))
    assert lifecycle(outbox.events, command.command_id) == [
        "command.requested",
        "command.accepted",
        "command.dispatched",
        "command.acknowledged",
        "command.converged",
    ]
    clock.now = T0 + timedelta(seconds=400)  # past its deadline: a finished command does not expire
    await a.tick()
    assert lifecycle(outbox.events, command.command_id)[-1] == "command.converged"


async def test_an_out_of_range_command_is_rejected_with_its_reason_and_never_dispatched() -> None:
    a, outbox, _ = actors()
    await a.handle_batch(records(register_request("t1", at=T0)))
    command = command_request("t1", "set_target_temperature", {"target_c": 99.0}, at=T0)
    await a.handle_batch(records(command))
    assert lifecycle(outbox.events, command.command_id) == ["command.requested", "command.rejected"]
    [rejected] = [e for e in outbox.events if isinstance(e, CommandRejected)]
    assert rejected.payload.reason == "out_of_range"
    assert outbox.commands == []


async def test_a_command_to_an_offline_device_is_held_until_it_reports_again() -> None:
    a, outbox, clock = actors()
    await a.handle_batch(
        records(register_request("t1", at=T0), report_request("t1", 1, at=T0, ambient_c=19.0))
    )
    clock.now = T0 + timedelta(seconds=61)
    await a.tick()  # silent for longer than offline_after_s
    assert any(isinstance(e, DeviceWentOffline) for e in outbox.events)
    command = command_request("t1", "set_target_temperature", {"target_c": 21.0}, at=clock.now)
    await a.handle_batch(records(command))
    assert outbox.commands == [] and "command.dispatched" not in lifecycle(outbox.events, command.command_id)
    clock.now += timedelta(seconds=1)
    await a.handle_batch(records(report_request("t1", 2, at=clock.now, ambient_c=19.5)))
    assert any(isinstance(e, DeviceCameOnline) for e in outbox.events)
    assert [c.command_id for c in outbox.commands] == [command.command_id]


async def test_a_newer_command_for_the_same_setting_supersedes_a_held_one() -> None:
    a, outbox, clock = actors()
    await a.handle_batch(
        records(register_request("t1", at=T0), report_request("t1", 1, at=T0, ambient_c=19.0))
    )
    clock.now = T0 + timedelta(seconds=61)
    await a.tick()  # offline: commands are held (accepted, not dispatched)
    first = command_request("t1", "set_target_temperature", {"target_c": 21.0}, at=clock.now)
    second = command_request("t1", "set_target_temperature", {"target_c": 22.0}, at=clock.now)
    await a.handle_batch(records(first, second))
    assert lifecycle(outbox.events, first.command_id)[-1] == "command.superseded"
    await a.handle_batch(records(report_request("t1", 2, at=clock.now, ambient_c=19.5)))
    assert [(c.command_id, c.params) for c in outbox.commands] == [(second.command_id, {"target_c": 22.0})]


async def test_a_command_that_comes_while_telemetry_is_decided_is_decided_before_the_rest_of_it() -> None:
    """``commands_meanwhile``: asked while a telemetry batch is decided (here after every request), its
    command is decided and sent before the readings after it, on the twin the readings before it left;
    the versions stay one sequence, and nothing is decided twice."""
    outbox, clock = FakeOutbox(), FakeClock(T0)
    a = DeviceActors({}, outbox, offline_after_s=60, clock=clock, check_commands_s=0)
    await a.handle_batch(
        records(register_request("t1", at=T0), report_request("t1", 1, at=T0, ambient_c=20.0))
    )
    telemetry = records(*(report_request("t1", seq, at=T0, ambient_c=20.0 + seq) for seq in range(2, 12)))
    command = command_request("t1", "set_target_temperature", {"target_c": 21.0}, at=T0)
    waiting = [InboxRecord("commands", 0, 0, None, encode(command))]
    asked = 0

    async def commands_meanwhile() -> list[InboxRecord]:
        nonlocal asked
        asked += 1
        return waiting if asked == 3 else []  # once, after the third reading

    before = len(outbox.events)
    await a.handle_batch(telemetry, commands_meanwhile=commands_meanwhile)
    sent = [wire_name(type(e)) for e in outbox.events[before:]]
    reported = [i for i, name in enumerate(sent) if name == "device.state_reported"]
    dispatched = sent.index(wire_name(CommandDispatched))
    assert len(reported) == 10 and reported[2] < dispatched < reported[3]
    assert [c.name for c in outbox.commands] == ["set_target_temperature"]
    assert versions(outbox.events, "t1") == list(range(1, len(versions(outbox.events, "t1")) + 1))
    twin = a.load("t1")
    assert twin is not None and twin.reported["ambient_c"] == 31.0 and twin.last_device_seq == 11
    assert [c.status for c in twin.commands.values()] == ["dispatched"]
    assert asked == 10  # after each of the ten readings, the command's own batch not asked


async def test_a_gap_between_a_twin_and_the_journal_stops_the_catch_up_before_any_twin_is_written() -> None:
    table: dict[bytes, bytes] = {}
    first, first_out, _ = actors(table)
    await first.handle_batch(records(register_request("t1", at=T0), register_request("t2", at=T0)))
    stale = dict(table)  # the twins at version 1
    await first.handle_batch(
        records(report_request("t2", 1, at=T0, ambient_c=20), report_request("t1", 1, at=T0, ambient_c=20))
    )
    await first.handle_batch(records(report_request("t1", 2, at=T0, ambient_c=21)))
    successor, _, _ = actors(stale)
    later = [e for e in first_out.events if e.version > 1 and not (e.device_id == "t1" and e.version == 2)]
    with pytest.raises(JournalGap, match="t1: twin at v1, next fact v3"):
        successor.catch_up(later)  # t1's v2 is missing: its twin is not the journal's
    assert successor.load("t2") == actors(stale)[0].load("t2")  # nothing written, t2 neither


async def test_a_batch_waiting_for_the_lock_goes_between_two_chunks_of_deadlines() -> None:
    """``check_deadlines``: many devices falling silent at once are checked ``chunk`` twins at a time,
    each chunk under the inbox's lock, and a batch that waits for the lock (a command's) goes after the
    first chunk, not after them all (10,000 at once held every command 0.5-2 s in `hearth bench mixed`)."""
    order: list[object] = []

    class Yielding(FakeOutbox):  # the broker's answer takes a turn of the loop, as a real one does
        async def send(self, events: list[Event], commands: list[DeviceCommand]) -> None:
            order.append(sorted({e.device_id for e in events}))
            await asyncio.sleep(0)
            await super().send(events, commands)

    outbox, clock = Yielding(), FakeClock(T0)
    a = DeviceActors({}, outbox, offline_after_s=60, clock=clock)
    devices = [f"t{i}" for i in range(5)]
    await a.handle_batch(records(*(register_request(d, at=T0) for d in devices)))
    await a.handle_batch(records(*(report_request(d, 1, at=T0, ambient_c=20.0) for d in devices)))
    order.clear()
    clock.now = T0 + timedelta(seconds=61)
    lock = asyncio.Lock()

    async def batch() -> None:
        async with lock:
            order.append("batch")

    checking = asyncio.create_task(a.check_deadlines(lock, chunk=2))
    await asyncio.sleep(0)  # the first chunk holds the lock and waits for the broker
    await batch()
    assert await checking == 5
    assert order == [["t0", "t1"], "batch", ["t2", "t3"], ["t4"]]
    assert sum(isinstance(e, DeviceWentOffline) for e in outbox.events) == 5
    assert a.due() == []


async def test_a_twin_a_batch_moved_between_two_chunks_is_not_due_any_more() -> None:
    a, outbox, clock = actors()
    await a.handle_batch(records(register_request("t1", at=T0), register_request("t2", at=T0)))
    await a.handle_batch(
        records(
            report_request("t1", 1, at=T0, ambient_c=20.0), report_request("t2", 1, at=T0, ambient_c=20.0)
        )
    )
    clock.now = T0 + timedelta(seconds=61)
    due = a.due()
    assert sorted(due) == [b"t1", b"t2"]
    await a.handle_batch(records(report_request("t2", 2, at=clock.now, ambient_c=20.5)))  # t2 reported
    await a.tick(due)
    assert [e.device_id for e in outbox.events if isinstance(e, DeviceWentOffline)] == ["t1"]
