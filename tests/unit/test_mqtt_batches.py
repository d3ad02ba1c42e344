"""Batched MQTT delivery (hearth_shared.adapters.mqtt_batches): a read's messages are one batch, its
PUBACKs one write once its handler returned, in arrival order across batches; a batch whose handler
raised, or whose connection dropped, is left unacknowledged (the broker delivers it again).

The connection is a stand-in object and ``write`` records what would go on the socket: what is under
test is when and what is acknowledged (tests/integration/test_gateway_*.py run it on a real broker).
"""

from __future__ import annotations

import asyncio

import pytest

from hearth_shared.adapters.mqtt_batches import BatchedDelivery, pubacks
from tests.support.waiting import eventually

pytestmark = pytest.mark.unit


class _Socket:
    """The current connection (replaced on a reconnect) and what was written on which."""

    def __init__(self) -> None:
        self.connection = object()
        self.writes: list[tuple[object, bytes]] = []

    def current(self) -> object:
        return self.connection

    def write(self, connection: object, data: bytes) -> None:
        self.writes.append((connection, data))


class _Handler:
    """Records each batch and returns (or raises) when the test says so, batch by batch."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, bytes]]] = []
        self.answers: list[asyncio.Future[None]] = []

    async def __call__(self, messages: list[tuple[str, bytes]]) -> None:
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.batches.append(messages)
        self.answers.append(answer)
        await answer


async def _batches(handler: _Handler, count: int) -> None:
    await eventually(lambda: len(handler.batches) >= count, f"{count} batches", timeout_s=2, every_s=0.001)


def test_pubacks_are_mqtt5_success_acknowledgements_in_order() -> None:
    assert pubacks([1, 258]) == b"\x40\x02\x00\x01" + b"\x40\x02\x01\x02"
    assert pubacks([]) == b""


async def test_one_reads_messages_are_one_batch_acknowledged_in_one_write_after_its_handler() -> None:
    socket, handler = _Socket(), _Handler()
    delivery = BatchedDelivery(handler, socket.current, socket.write)
    for mid in (7, 8, 9):
        delivery.add(mid, f"t/{mid}", b"p")
    await _batches(handler, 1)
    assert handler.batches == [[("t/7", b"p"), ("t/8", b"p"), ("t/9", b"p")]]
    await asyncio.sleep(0.01)
    assert socket.writes == []  # nothing acknowledged while the handler has not returned
    handler.answers[0].set_result(None)
    await delivery.settled()
    assert socket.writes == [(socket.connection, pubacks([7, 8, 9]))]


async def test_a_batch_is_acknowledged_only_after_the_batch_before_it() -> None:
    socket, handler = _Socket(), _Handler()
    delivery = BatchedDelivery(handler, socket.current, socket.write)
    delivery.add(1, "t", b"a")
    await _batches(handler, 1)
    delivery.add(2, "t", b"b")
    await _batches(handler, 2)
    handler.answers[1].set_result(None)  # the later batch is in Kafka first
    await asyncio.sleep(0.01)
    assert socket.writes == []
    handler.answers[0].set_result(None)
    await delivery.settled()
    assert [data for _, data in socket.writes] == [pubacks([1]), pubacks([2])]


async def test_a_batch_whose_handler_raised_stays_unacknowledged_and_the_next_one_goes_on() -> None:
    socket, handler = _Socket(), _Handler()
    delivery = BatchedDelivery(handler, socket.current, socket.write)
    delivery.add(1, "t", b"a")
    delivery.add(2, "t", b"b")
    await _batches(handler, 1)
    delivery.add(3, "t", b"c")
    await _batches(handler, 2)
    handler.answers[0].set_exception(ConnectionError("Kafka refused the batch"))
    handler.answers[1].set_result(None)
    await delivery.settled()
    assert [data for _, data in socket.writes] == [pubacks([3])]


async def test_a_batch_of_a_dropped_connection_is_not_acknowledged_on_the_next_one() -> None:
    socket, handler = _Socket(), _Handler()
    delivery = BatchedDelivery(handler, socket.current, socket.write)
    delivery.add(1, "t", b"a")
    await _batches(handler, 1)
    socket.connection = object()  # reconnected: the broker delivers message 1 again on this one
    handler.answers[0].set_result(None)
    await delivery.settled()
    assert socket.writes == []


async def test_qos0_messages_are_handed_over_in_their_place_without_an_acknowledgement() -> None:
    socket, handler = _Socket(), _Handler()
    delivery = BatchedDelivery(handler, socket.current, socket.write)
    delivery.add(1, "t", b"a")
    delivery.add(None, "t", b"qos0")
    delivery.add(2, "t", b"b")
    await _batches(handler, 1)
    assert [payload for _, payload in handler.batches[0]] == [b"a", b"qos0", b"b"]
    handler.answers[0].set_result(None)
    await delivery.settled()
    assert [data for _, data in socket.writes] == [pubacks([1, 2])]
