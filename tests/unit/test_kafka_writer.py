"""KafkaWriter replaces its producer after a produce error that leaves the producer's sequence out of step
with the broker's for good (``SEQUENCE_LOST``): that send fails, the next one goes through a new producer;
several sends failing at once renew it once; any other error leaves the producer as it is. And it counts
and logs the writes the broker was slow to take. Fake producers: the broker's side of it is Kafka's, not
ours."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError, OutOfOrderSequenceNumber

from hearth_shared.adapters import kafka
from hearth_shared.adapters.kafka import KafkaWriter
from hearth_shared.adapters.topics import Topics
from tests.support.inbox_requests import report_request

pytestmark = pytest.mark.unit


class FakeProducer:
    def __init__(self, fails_with: type[Exception] | None) -> None:
        self.fails_with = fails_with
        self.sent: list[bytes] = []
        self.stopped = False

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.stopped = True

    async def send(self, topic: str, value: bytes, key: bytes) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.fails_with is None:
            self.sent.append(key)
            future.set_result(None)
        else:
            future.set_exception(self.fails_with())
        return future


def producers(monkeypatch: pytest.MonkeyPatch, *fails: type[Exception] | None) -> list[FakeProducer]:
    """The producers ``make_producer`` hands out, in order (their failures as given)."""
    made: list[FakeProducer] = []
    waiting = list(fails)

    def make(*args: Any, **kwargs: Any) -> FakeProducer:
        made.append(FakeProducer(waiting.pop(0)))
        return made[-1]

    monkeypatch.setattr(kafka, "make_producer", make)
    return made


async def test_a_lost_sequence_fails_that_send_and_the_next_goes_through_a_new_producer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = producers(monkeypatch, OutOfOrderSequenceNumber, None)
    writer = KafkaWriter("unused:9092", Topics(), client_id="test")
    await writer.start()
    with pytest.raises(OutOfOrderSequenceNumber):
        await writer.send_requests(report_request("d1", 1, ambient_c=20.0))
    await writer.send_requests(report_request("d1", 1, ambient_c=20.0))  # the client's retry
    await writer.stop()
    assert writer.renewed == 1 and len(made) == 2
    assert made[0].stopped and made[1].sent == [b"d1"]


async def test_sends_failing_together_renew_the_producer_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made = producers(monkeypatch, OutOfOrderSequenceNumber, None)
    writer = KafkaWriter("unused:9092", Topics(), client_id="test")
    await writer.start()
    failed = await asyncio.gather(
        *(writer.send_requests(report_request(f"d{i}", 1, ambient_c=20.0)) for i in range(5)),
        return_exceptions=True,
    )
    await writer.stop()
    assert all(isinstance(f, OutOfOrderSequenceNumber) for f in failed)
    assert writer.renewed == 1 and len(made) == 2


async def test_another_error_keeps_the_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    made = producers(monkeypatch, KafkaTimeoutError)
    writer = KafkaWriter("unused:9092", Topics(), client_id="test")
    await writer.start()
    with pytest.raises(KafkaTimeoutError):
        await writer.send_requests(report_request("d1", 1, ambient_c=20.0))
    await writer.stop()
    assert writer.renewed == 0 and len(made) == 1


async def test_slow_writes_are_counted_and_logged_at_most_once_in_a_while(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    producers(monkeypatch, None)
    writer = KafkaWriter("unused:9092", Topics(), client_id="test")
    await writer.start()
    await writer.send_requests(report_request("d1", 1, ambient_c=20.0))
    assert writer.slow_writes == 0  # the fake broker takes it at once: under SLOW_WRITE_S
    monkeypatch.setattr(kafka, "SLOW_WRITE_S", 0.0)  # now every write is slow
    with caplog.at_level(logging.WARNING, logger=kafka.__name__):
        for seq in (2, 3, 4):
            await writer.send_requests(report_request("d1", seq, ambient_c=20.0))
    await writer.stop()
    assert writer.slow_writes == 3
    lines = [r.getMessage() for r in caplog.records if "writes to Kafka took" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("test: 1 writes"), lines  # the next two within 10 s
