"""Graceful overload (hearth_device_actor.service.coalescing): a device's state reports in one batch
folded into one, each key at its newest value, every report counted; never a command, never a device with
another request in the batch, never a report the twin already has. Through ``DeviceActors`` the twin ends
where deciding the reports one by one leaves it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from hearth_device_actor.service.actor import DeviceActors, InboxRecord
from hearth_device_actor.service.coalescing import coalesce, merge
from hearth_shared.schema.events import (
    AcknowledgeCommand,
    Inbound,
    RegisterDevice,
    ReportState,
    StateReported,
    encode,
)
from tests.support.fakes import FakeOutbox

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def report(device_id: str, seq: int, **state: float | str) -> ReportState:
    at = NOW + timedelta(seconds=seq)
    return ReportState(
        request_id=uuid.uuid4(), device_id=device_id, sent_at=at, device_seq=seq, device_time=at, state=state
    )


def numbered(*requests: Inbound) -> list[tuple[int, Inbound]]:
    return list(enumerate(requests))


def never_seen(device_id: str) -> int:
    return -1


def test_merge_keeps_the_newest_report_with_every_key_at_its_newest_value() -> None:
    merged = merge([report("d", 3, ambient_c=21.0), report("d", 1, ambient_c=19.0, humidity_pct=40.0)])
    assert (merged.device_seq, merged.state) == (3, {"ambient_c": 21.0, "humidity_pct": 40.0})


def test_each_devices_reports_become_one_at_the_place_of_its_newest() -> None:
    batch = numbered(
        report("a", 1, ambient_c=19.0),
        report("b", 1, ambient_c=30.0),
        report("a", 2, humidity_pct=41.0),
        report("a", 3, ambient_c=20.5),
    )
    out, folded = coalesce(batch, never_seen)
    assert folded == 2
    assert [(i, r.device_id) for i, r in out] == [(1, "b"), (3, "a")]
    newest = out[1][1]
    assert isinstance(newest, ReportState)
    assert (newest.device_seq, newest.state) == (3, {"ambient_c": 20.5, "humidity_pct": 41.0})


def test_a_device_with_another_request_in_the_batch_is_left_as_it_is() -> None:
    ack = AcknowledgeCommand(
        request_id=uuid.uuid4(), device_id="a", sent_at=NOW, command_id=uuid.uuid4(), ok=True
    )
    batch = numbered(report("a", 1, ambient_c=19.0), ack, report("a", 2, ambient_c=20.0))
    assert coalesce(batch, never_seen) == (batch, 0)


def test_reports_the_twin_has_already_are_not_merged_in() -> None:
    batch = numbered(report("a", 4, humidity_pct=10.0), report("a", 6, ambient_c=19.0), report("a", 7))
    out, folded = coalesce(batch, lambda device_id: 5)
    assert folded == 1  # seq 6 into 7; seq 4 left for decide, which ignores it as old
    merged = out[-1][1]
    assert isinstance(merged, ReportState)
    assert (merged.device_seq, merged.state) == (7, {"ambient_c": 19.0})
    assert [i for i, _ in out] == [0, 2]


def test_a_single_report_and_other_requests_pass_unchanged() -> None:
    registration = RegisterDevice(
        request_id=uuid.uuid4(), device_id="c", sent_at=NOW, home_id="h", device_type="thermostat", name="c"
    )
    batch = numbered(registration, report("a", 1, ambient_c=19.0))
    assert coalesce(batch, never_seen) == (batch, 0)


async def registered(outbox: FakeOutbox) -> DeviceActors:
    """The actors with thermostat ``th-1`` registered."""
    actors = DeviceActors({}, outbox, offline_after_s=60, clock=lambda: NOW)
    registration = RegisterDevice(
        request_id=uuid.uuid4(), device_id="th-1", sent_at=NOW, home_id="h", device_type="thermostat",
        name="Hall",
    )  # fmt: skip
    await actors.handle_batch([InboxRecord("lane", 0, 0, b"th-1", encode(registration))])
    return actors


async def test_the_actor_coalesces_only_when_told_and_the_twin_ends_the_same() -> None:
    reports = [report("th-1", seq, ambient_c=19.0 + seq, humidity_pct=40.0 + seq) for seq in range(1, 6)]

    async def decided(coalesce_reports: bool) -> tuple[DeviceActors, FakeOutbox]:
        outbox = FakeOutbox()
        actors = await registered(outbox)
        records = [InboxRecord("inbox", 0, i, b"th-1", encode(r)) for i, r in enumerate(reports)]
        await actors.handle_batch(records, coalesce_reports=coalesce_reports)
        return actors, outbox

    one_by_one, every = await decided(False)
    coalesced, fewer = await decided(True)
    twin, same = one_by_one.load("th-1"), coalesced.load("th-1")
    assert twin is not None and same is not None
    assert (same.reported, same.last_device_seq) == (twin.reported, twin.last_device_seq)
    assert sum(isinstance(e, StateReported) for e in every.events) == 5
    assert sum(isinstance(e, StateReported) for e in fewer.events) == 1
    assert (coalesced.coalesced.reports, one_by_one.coalesced.reports) == (4, 0)
    assert coalesced.processed == one_by_one.processed == 6  # every record read is counted


async def test_a_report_that_comes_after_a_newer_one_records_what_no_newer_one_said() -> None:
    """An ack's report on the command lane can overtake its device's telemetry: the older report then
    records the keys the newer did not carry (the newest the device said of them), never one it did; a
    report with nothing left to record (a duplicate, or overtaken whole) is counted, not lost without a
    trace."""
    outbox = FakeOutbox()
    actors = await registered(outbox)
    newer = report("th-1", 2, target_c=21.0)
    older = report("th-1", 1, ambient_c=19.5, target_c=20.0)
    await actors.handle_batch([InboxRecord("lane", 0, 1, b"th-1", encode(newer))])
    await actors.handle_batch([InboxRecord("inbox", 0, 0, b"th-1", encode(older))])
    recorded = [e.payload for e in outbox.events if isinstance(e, StateReported)]
    assert [(p.reported, p.device_seq) for p in recorded] == [
        ({"target_c": 21.0}, 2),
        ({"ambient_c": 19.5}, 1),
    ]
    twin = actors.load("th-1")
    assert twin is not None
    assert (twin.reported["ambient_c"], twin.reported["target_c"], twin.last_device_seq) == (19.5, 21.0, 2)
    assert actors.late_reports == 0
    overtaken = report("th-1", 1, target_c=20.0)  # its one key carried by seq 2
    await actors.handle_batch([InboxRecord("inbox", 0, 1, b"th-1", encode(overtaken))])
    await actors.handle_batch([InboxRecord("inbox", 0, 2, b"th-1", encode(older))])  # redelivered
    assert sum(isinstance(e, StateReported) for e in outbox.events) == 2
    assert actors.late_reports == 2


async def test_a_request_for_a_device_not_registered_is_no_fact_and_is_counted() -> None:
    """A report or an ack from a device the twins do not know changes nothing and is counted (``hearth
    status`` says how many), not dropped without a trace; it is not a late report."""
    outbox = FakeOutbox()
    actors = await registered(outbox)
    before = len(outbox.events)
    await actors.handle_batch(
        [InboxRecord("inbox", 0, 0, b"th-9", encode(report("th-9", 1, ambient_c=19.5)))]
    )
    assert len(outbox.events) == before
    assert (actors.unknown_device_requests, actors.late_reports) == (1, 0)
