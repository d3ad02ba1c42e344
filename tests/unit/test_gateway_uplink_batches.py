"""The gateway's uplink takes MQTT messages a batch at a time (issue 21): each request on its lane in
arrival order, an ack's report right after its ack, bad messages refused alone; and batched production
loses nothing when Kafka refuses a batch: the MQTT batch stays unacknowledged, the broker delivers it
again, and then every report is in Kafka, in order, acknowledged once.

Kafka's producer is a stand-in for its record-batch side (``FakeBatchProducer``) and the MQTT socket a
recorder of PUBACK writes: what is under test is the uplink's and the delivery's bookkeeping (the same
path runs on real servers in tests/integration/test_gateway_bridge.py and test_gateway_recovery.py).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from hearth_device_gateway.adapters.inbox_writer import InboxLanes
from hearth_device_gateway.entrypoints.uplink import Uplink
from hearth_shared.adapters.kafka import DeadLetters
from hearth_shared.adapters.mqtt_batches import BatchedDelivery, pubacks
from hearth_shared.adapters.topics import Topics
from hearth_shared.schema.events import AcknowledgeCommand, ReportAvailability, ReportState, decode_inbound
from tests.support.fakes import FakeBatchProducer
from tests.support.waiting import eventually

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)
TOPICS = Topics("test")


class _DeadLetters:
    def __init__(self) -> None:
        self.letters: list[tuple[str, str]] = []  # (MQTT topic, reason)

    async def send(self, *, topic: str, error: Exception, **_: Any) -> None:
        self.letters.append((topic, getattr(error, "reason", "")))


def _state(device: str, seq: int) -> tuple[str, bytes]:
    body = {"seq": seq, "at": "2026-11-27T11:59:59+00:00", "state": {"ambient_c": 20.0 + seq / 10}}
    return f"hearth/devices/{device}/state", json.dumps(body).encode()


def _uplink(producer: FakeBatchProducer) -> tuple[Uplink, _DeadLetters, list[tuple[str, bytes]]]:
    inbox = InboxLanes(producer, TOPICS, batch_size=1000, linger_s=0.0)
    letters, errors = _DeadLetters(), []
    uplink = Uplink(
        inbox,
        cast(DeadLetters, letters),
        lambda topic, payload: errors.append((topic, payload)),
        clock=lambda: NOW,
    )
    return uplink, letters, errors


async def test_a_batch_goes_on_its_lanes_in_order_with_an_acks_report_right_after_it() -> None:
    producer = FakeBatchProducer()
    uplink, letters, errors = _uplink(producer)
    command = uuid.uuid4()
    ack = {"command_id": str(command), "result": "ok", "report": json.loads(_state("t-1", 3)[1])}
    batch = [
        _state("t-1", 1),
        ("hearth/devices/t-1/acks", json.dumps(ack).encode()),
        _state("t-2", 1),
        ("hearth/devices/t-2/availability", b"online"),
        ("hearth/devices/t-2/state", b"{not json"),
        _state("t-1", 2),
    ]
    handled = asyncio.create_task(uplink.handle_batch(batch))
    lanes = {TOPICS.inbox, TOPICS.command_lane}
    await eventually(lambda: set(producer.topics) == lanes, "both lanes sent", timeout_s=2, every_s=0.001)
    assert not handled.done()  # not before Kafka has the records
    producer.answer()
    await asyncio.wait_for(handled, 2)

    def by_device(topic: str) -> dict[str, list[str]]:
        """Each device's records on a lane, in order (a report as its seq)."""
        records: dict[str, list[str]] = {}
        for _, value in producer.stored(topic):
            r = decode_inbound(value)
            records.setdefault(r.device_id, []).append(
                f"report {r.device_seq}" if isinstance(r, ReportState) else type(r).__name__
            )
        return records

    assert by_device(TOPICS.inbox) == {"t-1": ["report 1", "report 2"], "t-2": ["report 1"]}
    assert by_device(TOPICS.command_lane) == {
        "t-1": [AcknowledgeCommand.__name__, "report 3"],
        "t-2": [ReportAvailability.__name__],
    }
    assert (uplink.accepted, uplink.refused) == (5, 1)
    assert letters.letters == [("hearth/devices/t-2/state", "invalid_json")]
    assert [topic for topic, _ in errors] == ["hearth/devices/t-2/errors"]


async def test_a_batch_kafka_refused_is_delivered_again_and_then_nothing_is_lost_or_out_of_order() -> None:
    producer = FakeBatchProducer()
    uplink, _, _ = _uplink(producer)
    connection = object()
    written: list[bytes] = []
    delivery = BatchedDelivery(uplink.handle_batch, lambda: connection, lambda _c, data: written.append(data))
    reports = [_state("t-1", seq) for seq in range(1, 7)]

    def read(first_mid: int, messages: list[tuple[str, bytes]]) -> None:
        for mid, (topic, payload) in enumerate(messages, start=first_mid):
            delivery.add(mid, topic, payload)

    read(1, reports[:3])
    await eventually(lambda: len(producer.sent) == 1, "the first batch sent", timeout_s=2, every_s=0.001)
    producer.answer(ConnectionError("Kafka refused the batch"))
    await delivery.settled()
    assert uplink.failed.is_set()  # the gateway stops and restarts on this
    assert written == []  # nothing acknowledged: the broker still has the batch

    read(1, reports[:3])  # the broker delivers it again (its persistent session), then the rest
    await eventually(lambda: len(producer.sent) == 2, "the batch sent again", timeout_s=2, every_s=0.001)
    read(4, reports[3:])
    await eventually(lambda: len(producer.sent) == 3, "the next batch sent", timeout_s=2, every_s=0.001)
    producer.answer()
    await delivery.settled()
    stored = [decode_inbound(value) for _, value in producer.stored(TOPICS.inbox)]
    assert [r.device_seq for r in stored if isinstance(r, ReportState)] == [1, 2, 3, 4, 5, 6]
    assert written == [pubacks([1, 2, 3]), pubacks([4, 5, 6])]


class _SlowDeadLetters(_DeadLetters):
    """Dead letters whose write of an ``invalid_json`` waits until ``release`` is set (a slow answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def send(self, *, topic: str, error: Exception, **rest: Any) -> None:
        if getattr(error, "reason", "") == "invalid_json":
            await self.release.wait()
        await super().send(topic=topic, error=error, **rest)


async def test_a_devices_refusals_are_answered_in_its_order_across_batches() -> None:
    """Batches are handled concurrently (mqtt_batches.py); a later batch's refusal waits for the earlier
    batch's, even through a batch between them that refused nothing (seen in a fresh-clone run: a
    device read ``unstorable_value`` before ``invalid_fields``)."""
    producer = FakeBatchProducer()
    letters, errors = _SlowDeadLetters(), []
    inbox = InboxLanes(producer, TOPICS, batch_size=1000, linger_s=0.0)
    uplink = Uplink(inbox, cast(DeadLetters, letters), lambda t, p: errors.append((t, p)), clock=lambda: NOW)
    topic = "hearth/devices/t-1/state"
    first = asyncio.create_task(uplink.handle_batch([(topic, b"{not json")]))
    between = asyncio.create_task(uplink.handle_batch([_state("t-1", 1)]))
    last = asyncio.create_task(uplink.handle_batch([(topic, b'{"seq": 2, "state": {}}')]))
    await eventually(lambda: len(producer.sent) == 1, "the report sent", timeout_s=2, every_s=0.001)
    producer.answer()
    for _ in range(20):  # every task runs as far as it can (fakes only: no I/O to wait for)
        await asyncio.sleep(0)
    assert letters.letters == [] and errors == []  # the last batch did not overtake the first
    assert not between.done()  # it waits for the first too, so the chain never skips a batch
    letters.release.set()
    await asyncio.wait_for(asyncio.gather(first, between, last), 2)
    assert letters.letters == [(topic, "invalid_json"), (topic, "invalid_fields")]
    reasons = [json.loads(payload)["error"] for _, payload in errors]
    assert reasons == ["invalid_json", "invalid_fields"]
