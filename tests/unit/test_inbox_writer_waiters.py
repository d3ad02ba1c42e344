"""The gateway's inbox writer: each ``put`` returns once its batch is in Kafka, raises if the batch was
refused, and a cancelled ``put`` leaves the other records of its batch alone (one waiter per put).

The producer is a stand-in that records the batches and answers when the test says so: what is under
test is the writer's batching and waking, not Kafka (tests/integration/test_device_gateway.py and
test_gateway_recovery.py run it against a real broker).
"""

from __future__ import annotations

import asyncio

import pytest

from hearth_device_gateway.adapters.inbox_writer import InboxWriter
from tests.support.fakes import FakeBatchProducer
from tests.support.waiting import eventually

pytestmark = pytest.mark.unit


def _writer(producer: FakeBatchProducer, batch_size: int = 3) -> InboxWriter:
    return InboxWriter(producer, "inbox", batch_size=batch_size, linger_s=10.0)


async def test_puts_return_only_when_their_batch_is_in_kafka() -> None:
    producer = FakeBatchProducer()
    writer = _writer(producer)
    puts = [asyncio.create_task(writer.put(b"d1", f"r{i}".encode())) for i in range(3)]  # a full batch
    await eventually(lambda: bool(producer.sent), "a batch sent", timeout_s=1, every_s=0.005)
    assert not any(p.done() for p in puts)
    for _, future in producer.sent:
        future.set_result(None)
    await asyncio.wait_for(asyncio.gather(*puts), 1)
    assert writer.written == 3
    assert [r for batch, _ in producer.sent for r in batch.records] == [
        (b"d1", b"r0"),
        (b"d1", b"r1"),
        (b"d1", b"r2"),
    ]


async def test_a_refused_batch_raises_in_every_put_of_it() -> None:
    producer = FakeBatchProducer()
    writer = _writer(producer)
    puts = [asyncio.create_task(writer.put(b"d1", b"r")) for _ in range(3)]
    await eventually(lambda: bool(producer.sent), "a batch sent", timeout_s=1, every_s=0.005)
    for _, future in producer.sent:
        future.set_exception(ConnectionError("broker refused"))
    results = await asyncio.gather(*puts, return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)
    assert writer.written == 0


async def test_a_cancelled_put_leaves_the_rest_of_its_batch_alone() -> None:
    producer = FakeBatchProducer()
    writer = _writer(producer)
    puts = [asyncio.create_task(writer.put(b"d1", f"r{i}".encode())) for i in range(3)]
    await eventually(lambda: bool(producer.sent), "a batch sent", timeout_s=1, every_s=0.005)
    puts[1].cancel()
    for _, future in producer.sent:
        future.set_result(None)
    results = await asyncio.gather(*puts, return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], asyncio.CancelledError)
    assert writer.written == 3  # the record itself was sent: at least once, never lost


async def test_close_sends_what_is_gathered() -> None:
    producer = FakeBatchProducer()
    writer = _writer(producer, batch_size=100)
    put = asyncio.create_task(writer.put(b"d1", b"r"))
    await asyncio.sleep(0)
    assert not producer.sent  # lingering (10 s) for more
    closing = asyncio.create_task(writer.close())
    await eventually(lambda: bool(producer.sent), "a batch sent", timeout_s=1, every_s=0.005)
    producer.sent[0][1].set_result(None)
    await asyncio.wait_for(asyncio.gather(put, closing), 1)
    assert writer.written == 1
