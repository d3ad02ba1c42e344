"""Puts device requests on the inbox in batches, and tells each sender when the broker has its record.

``put`` returns once the record is in Kafka (acks=all, idempotent producer): only then may the gateway
acknowledge the MQTT message it came from. Records are gathered for ``linger_s`` (or until ``batch_size``)
and queued with one record batch per partition (``send_batched``). Queuing happens under a lock, in the
order ``put`` was called, so the records of one device reach its partition in the order they arrived;
waiting for the broker happens outside it, so the next batch is gathered meanwhile.

Each ``put`` waits on a future of its own, which the batch resolves when the broker answers: cancelling
one ``put`` cancels only its own wait, never the batch's other records. (It was ``asyncio.shield`` of
one future per batch: per record that is two futures, and a callback and a loop round more, which the
gateway's profile showed at about 13 % of its CPU.)

If the broker refuses a batch, every ``put`` of it raises: their MQTT messages stay unacknowledged and
the broker delivers them again (after the gateway reconnects or restarts). Nothing is acknowledged that
Kafka does not have.

``InboxLanes`` holds one writer per lane of the inbox (``Topics.lane_of``): acks and availability on the
command lane, which does not linger (an ack is what a command's convergence waits for), state reports on
the telemetry lane. Each lane keeps a device's records in arrival order; across lanes the actor serves
the command lane first (see hearth_device_actor.inbox for why that is safe). The one exception to
``Topics.lane_of``: the report an ack carries (the state its command left) goes on the command lane right
after its ack (``put_answer``), so the command's convergence does not wait behind telemetry either; its seq
orders it against the device's other reports as on one lane.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiokafka import AIOKafkaProducer

from hearth_shared.adapters.kafka import send_batched
from hearth_shared.adapters.topics import Topics
from hearth_shared.schema.events import ReportState, encode
from hearth_shared.schema.record_envelope import Inbound


class InboxWriter:
    def __init__(self, producer: AIOKafkaProducer, topic: str, *, batch_size: int, linger_s: float) -> None:
        self.producer = producer
        self.topic = topic
        self.batch_size = batch_size
        self.linger_s = linger_s
        self.written = 0
        self._records: list[tuple[bytes, bytes]] = []
        self._waiters: list[asyncio.Future[None]] = []  # one per record gathered, in order
        self._timer: asyncio.TimerHandle | None = None
        self._queue_lock = asyncio.Lock()
        self._flushes: set[asyncio.Task[None]] = set()

    async def put(self, key: bytes, value: bytes) -> None:
        """Queue one record; returns when the broker has it (raises if it refused it)."""
        await self._gather(key, value)

    async def put_all(self, records: list[tuple[bytes, bytes]]) -> None:
        """Queue records in this order; returns when the broker has every one (raises if it refused one)."""
        await asyncio.gather(*[self._gather(key, value) for key, value in records])

    def _gather(self, key: bytes, value: bytes) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        if not self._records:
            self._timer = loop.call_later(self.linger_s, self._flush)
        waiter = loop.create_future()
        self._records.append((key, value))
        self._waiters.append(waiter)
        if len(self._records) >= self.batch_size:
            self._flush()
        return waiter

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        records, waiters = self._records, self._waiters
        self._records, self._waiters = [], []
        if not records:
            return
        task = asyncio.create_task(self._send(records, waiters))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _send(self, records: list[tuple[bytes, bytes]], waiters: list[asyncio.Future[None]]) -> None:
        try:
            async with self._queue_lock:
                futures = await send_batched(self.producer, self.topic, records)
            await asyncio.gather(*futures)
        except Exception as error:  # the puts raise it; their messages are delivered again later
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(error)
                    waiter.add_done_callback(_retrieve)  # no "never retrieved" warning for a gone put
            return
        self.written += len(records)
        for waiter in waiters:
            if not waiter.done():  # (a cancelled put's waiter is done already)
                waiter.set_result(None)

    async def close(self) -> None:
        """Send what is gathered and wait for every batch under way."""
        self._flush()
        if self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)


class InboxLanes:
    """An ``InboxWriter`` per lane; ``put`` sends a request on its lane."""

    def __init__(
        self, producer: AIOKafkaProducer, topics: Topics, *, batch_size: int, linger_s: float
    ) -> None:
        self.topics = topics
        self.telemetry = InboxWriter(producer, topics.inbox, batch_size=batch_size, linger_s=linger_s)
        self.commands = InboxWriter(producer, topics.command_lane, batch_size=batch_size, linger_s=0.0)

    async def put(self, request: Inbound) -> None:
        """Queue the request on its lane; returns when the broker has it (raises if it refused it)."""
        lane = self.commands if self.topics.lane_of(request) == self.commands.topic else self.telemetry
        await lane.put(request.device_id.encode(), encode(request))

    async def put_answer(self, ack: Inbound, report: ReportState) -> None:
        """An ack and the report it carried, both on the command lane, the ack first (see the module)."""
        key = ack.device_id.encode()
        await self.commands.put_all([(key, encode(ack)), (key, encode(report))])

    @property
    def written(self) -> int:
        return self.telemetry.written + self.commands.written

    async def close(self) -> None:
        await asyncio.gather(self.commands.close(), self.telemetry.close())


def _retrieve(future: asyncio.Future[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError, Exception):
        future.exception()
