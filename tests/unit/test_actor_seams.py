"""The device actors through their seams: a fake ``Outbox`` and a fake clock, no broker.

What the hot path promises: facts numbered 1, 2, 3... per device and handed to the outbox once; twins
written only after the outbox has the facts; a redelivered batch decides nothing; deadlines fire from the
clock; an unreadable record is dead-lettered and the batch goes on; and a successor that caught up with
the journal (``catch_up``) decides nothing again for requests its predecessor already recorded.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hearth_device_actor.actor import DeviceActors, InboxRecord
from hearth_shared.events import (
    CommandDispatched,
    CommandExpired,
    DeviceWentOffline,
    Event,
    Inbound,
    encode,
)
from tests.fakes import FakeClock, FakeOutbox
from tests.support import command_request, register_request, report_request

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
