"""Puts device requests on the inbox in batches, and tells each sender when the broker has its record.

``put_all`` returns once its records are in Kafka (acks=all, idempotent producer): only then may the
gateway acknowledge the MQTT messages they came from. The gateway puts a whole batch of MQTT messages at
once (mqtt_batches.py: what one read of the socket brought); puts are gathered for ``linger_s`` (or until
``batch_size`` records) and queued with one record batch per partition (``send_batched``): one produce
call for many MQTT batches. Queuing happens under a lock, in the order ``put_all`` was called, so the
records of one device reach its partition in the order they arrived; waiting for the broker happens
outside it, so the next batch is gathered meanwhile.

Each ``put_all`` waits on a future of its own, which the batch resolves when the broker answers:
cancelling one cancels only its own wait, never the batch's other records. (A future per record, and
before that ``asyncio.shield`` of one per batch, cost the gateway a future, a callback and a loop round
per message: 13 % of its CPU in one profile.)

If the broker refuses a batch, every ``put_all`` of it raises: their MQTT messages stay unacknowledged
and the broker delivers them again (after the gateway reconnects or restarts). Nothing is acknowledged
that Kafka does not have.

``InboxLanes`` holds one writer per lane of the inbox (``Topics.lane_of``): acks and availability on the
command lane, which does not linger (an ack is what a command's convergence waits for), state reports on
the telemetry lane. Each lane keeps a device's records in arrival order; across lanes the actor serves
the command lane first (see hearth_device_actor.entrypoints.inbox for why that is safe). The one exception to
``Topics.lane_of``: the report an ack carries (the state its command left) goes on the command lane right
after its ack (``put_all``), so the command's convergence does not wait behind telemetry either; its seq
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
        self._waiters: list[asyncio.Future[None]] = []  # one per put gathered, in order
        self._timer: asyncio.TimerHandle | None = None
        self._queue_lock = asyncio.Lock()
        self._flushes: set[asyncio.Task[None]] = set()

    async def put(self, key: bytes, value: bytes) -> None:
        """Queue one record; returns when the broker has it (raises if it refused it)."""
        await self.put_all([(key, value)])

    async def put_all(self, records: list[tuple[bytes, bytes]]) -> None:
        """Queue records in this order; returns when the broker has every one (raises if it refused one)."""
        if records:
            await self.queue(records)

    def queue(self, records: list[tuple[bytes, bytes]]) -> asyncio.Future[None]:
        """Queue records in this order (at least one); the future resolves when the broker has every
        one, or fails if it refused one."""
        loop = asyncio.get_running_loop()
        if not self._records:
            self._timer = loop.call_later(self.linger_s, self._flush)
        waiter = loop.create_future()
        self._records.extend(records)
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
    """An ``InboxWriter`` per lane; ``put_all`` sends each request on its lane."""

    def __init__(
        self, producer: AIOKafkaProducer, topics: Topics, *, batch_size: int, linger_s: float
    ) -> None:
        self.topics = topics
        self.telemetry = InboxWriter(producer, topics.inbox, batch_size=batch_size, linger_s=linger_s)
        self.commands = InboxWriter(producer, topics.command_lane, batch_size=batch_size, linger_s=0.0)

    async def put_all(self, requests: list[tuple[Inbound, ReportState | None]]) -> None:
        """Queue each request on its lane, in this order, with the report an ack carried (or None) right
        after its ack on the command lane (see the module); returns when the broker has every record
        (raises if it refused one)."""
        commands: list[tuple[bytes, bytes]] = []
        telemetry: list[tuple[bytes, bytes]] = []
        command_lane = self.commands.topic
        for request, answer in requests:
            key = request.device_id.encode()
            if answer is not None:
                commands += ((key, encode(request)), (key, encode(answer)))
            elif self.topics.lane_of(request) == command_lane:
                commands.append((key, encode(request)))
            else:
                telemetry.append((key, encode(request)))
        lanes = ((self.commands, commands), (self.telemetry, telemetry))
        await asyncio.gather(*[writer.queue(records) for writer, records in lanes if records])

    @property
    def written(self) -> int:
        return self.telemetry.written + self.commands.written

    async def close(self) -> None:
        await asyncio.gather(self.commands.close(), self.telemetry.close())


def _retrieve(future: asyncio.Future[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError, Exception):
        future.exception()
