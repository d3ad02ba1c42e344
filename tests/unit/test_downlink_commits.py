"""The gateway's downlink commits the device-bound topic's offsets only for messages the MQTT broker
acknowledged, and not after every batch: at most every ``COMMIT_EVERY_S`` while commands keep coming, at
once when the topic goes quiet, and on stop.

The consumer and the MQTT publish are stand-ins the test scripts: what is under test is when the
downlink commits what, not Kafka (tests/integration/test_device_gateway.py and test_gateway_recovery.py
run it against real brokers).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from aiokafka import ConsumerRecord, TopicPartition

from hearth_device_gateway.entrypoints import downlink as downlink_module
from hearth_device_gateway.entrypoints.downlink import Downlink
from hearth_shared.schema.events import DeviceCommand, encode, utcnow
from tests.support.waiting import eventually

pytestmark = pytest.mark.unit

TP = TopicPartition("t.device-commands", 3)


def _record(offset: int) -> ConsumerRecord[bytes, bytes]:
    command = DeviceCommand(
        command_id=uuid.uuid4(),
        device_id="thermostat-1",
        name="set_target_temperature",
        params={"target_c": 21.0},
        expires_at=utcnow() + timedelta(seconds=30),
    )
    return ConsumerRecord(
        TP.topic, TP.partition, offset, 0, 0, b"thermostat-1", encode(command), None, 0, 0, []
    )


class _Consumer:
    """Hands out the scripted batches (an empty poll when none is due) and records the commits."""

    def __init__(self) -> None:
        self.batches: asyncio.Queue[dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]] = (
            asyncio.Queue()
        )
        self.commits: list[dict[TopicPartition, int]] = []
        self.quiet = asyncio.Event()  # set: a poll with no batch due comes back empty after its timeout

    async def getmany(self, *, timeout_ms: int, max_records: int) -> dict[TopicPartition, Any]:
        if not self.quiet.is_set():
            return await self.batches.get()
        try:
            return await asyncio.wait_for(self.batches.get(), timeout_ms / 1000)
        except TimeoutError:
            return {}

    def go_quiet(self) -> None:
        """From now on a poll with no batch due comes back empty (the one waiting now, at once)."""
        self.quiet.set()
        self.batches.put_nowait({})

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(dict(offsets))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        raise AssertionError("no session is lost in these tests")


class _Publish:
    """MQTT publishes whose PUBACKs the test gives."""

    def __init__(self) -> None:
        self.pending: list[asyncio.Future[None]] = []

    def __call__(self, topic: str, payload: bytes) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        return future

    def ack_all(self) -> None:
        for future in self.pending:
            if not future.done():
                future.set_result(None)


async def test_commits_only_acknowledged_offsets_and_not_per_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(downlink_module, "COMMIT_EVERY_S", 60.0)  # only quiet and stop commit here
    consumer, publish = _Consumer(), _Publish()
    link = Downlink(consumer, publish, dead_letters=None)  # type: ignore[arg-type]  # never used
    runner = asyncio.create_task(link.run())
    for count in (1, 2, 3):  # three batches back to back, each acknowledged at once
        await consumer.batches.put({TP: [_record(count - 1)]})
        await eventually(lambda n=count: len(publish.pending) == n, "the batch published")
        assert consumer.commits == [], "nothing is committed before its PUBACK"
        publish.ack_all()
        await eventually(lambda n=count: link.sent == n, "the batch acknowledged")
    assert consumer.commits == [], "not a commit per batch"
    consumer.go_quiet()
    await eventually(lambda: bool(consumer.commits), "a commit once the topic went quiet", timeout_s=10)
    assert consumer.commits == [{TP: 3}]

    await consumer.batches.put({TP: [_record(3), _record(4)]})
    await eventually(lambda: len(publish.pending) == 5, "the last batch published")
    runner.cancel()  # stopped before the broker acknowledged offsets 3 and 4
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert consumer.commits[-1] == {TP: 3}, "unacknowledged messages are never committed"


async def test_commits_while_busy_and_on_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(downlink_module, "COMMIT_EVERY_S", 0.0)
    consumer, publish = _Consumer(), _Publish()
    link = Downlink(consumer, publish, dead_letters=None)  # type: ignore[arg-type]
    runner = asyncio.create_task(link.run())
    await consumer.batches.put({TP: [_record(0)]})
    await eventually(lambda: len(publish.pending) == 1, "the batch published")
    publish.ack_all()
    await eventually(lambda: consumer.commits == [{TP: 1}], "the commit after the batch (due at once)")

    monkeypatch.setattr(downlink_module, "COMMIT_EVERY_S", 60.0)
    await consumer.batches.put({TP: [_record(1)]})
    await eventually(lambda: len(publish.pending) == 2, "the second batch published")
    publish.ack_all()
    await eventually(lambda: link.sent == 2, "the second batch acknowledged")
    runner.cancel()  # stopped with offset 1 acknowledged but not yet committed
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert consumer.commits[-1] == {TP: 2}
