"""Device -> Hearth: each MQTT message from a device becomes an inbox request, or a dead letter.

Messages come in batches (``handle_batch``: what one read of the MQTT socket brought, in order; see
hearth_shared.adapters.mqtt_batches). A good message (``edge.translate``) is put on the inbox keyed by
device_id, on its lane (an ack or an availability on the command lane, a state report on telemetry:
``InboxLanes``; an ack's report right after its ack on the command lane), the batch's in one ``put_all``;
the handler returns, and so the batch's MQTT messages are acknowledged, only once Kafka has all their
records. A message the edge refuses goes to the
dead-letter topic with its reason (the MQTT topic as source, partition and offset -1: it never was in
Kafka), and an ``errors`` message goes back to the device; the bad message is then acknowledged, so it
is not delivered again, and the device stays connected. An ack whose report the edge refuses goes on the
inbox without it, and the report alone is refused so (the dead letter holds the whole ack payload).

The gateway has an ``Uplink`` per MQTT connection: ``publish_error`` answers on the connection the
message came in on.

A device's refusals are answered in the order its messages came, across batches too: the handler of a
batch may run while the one before still waits for Kafka (mqtt_batches.py), so each batch dead-letters
and answers its refusals only after the batch before it is done with its own (``_answered``, a chain:
every batch waits for the one before, refusals or not, so the chain never skips one). A batch's
PUBACKs wait for the batch before anyway (mqtt_batches.py), so the wait delays no acknowledgement.
Without it, two batches' refusals interleaved at their awaits, and a device read its errors out of
order.

If Kafka fails, the handler raises: the batch stays unacknowledged and ``failed`` is set, so the
gateway stops and its restart gets the batch again from its persistent MQTT session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from hearth_device_gateway.adapters.inbox_writer import InboxLanes
from hearth_device_gateway.service.edge import translate
from hearth_shared.adapters.kafka import DeadLetters
from hearth_shared.schema.events import Inbound, MalformedRecord, ReportState, utcnow
from hearth_shared.schema.ids import is_identifier
from hearth_shared.schema.mqtt import ErrorMessage, encode_message, errors_topic, parse_topic

log = logging.getLogger(__name__)

NOT_FROM_KAFKA = -1  # the dead letter's partition and offset: it came from MQTT

Publish = Callable[[str, bytes], object]


class Uplink:
    def __init__(
        self,
        inbox: InboxLanes,
        dead_letters: DeadLetters,
        publish_error: Publish,
        *,
        clock: Callable[[], datetime] = utcnow,
        owns: Callable[[str], bool] | None = None,
    ) -> None:
        """``owns``: whether a message's topic is this gateway's to take (``Shard.owns``; None: all are)."""
        self.owns = owns
        self.inbox = inbox
        self.dead_letters = dead_letters
        self.publish_error = publish_error
        self.clock = clock
        self.accepted = 0
        self.refused = 0
        self.failed = asyncio.Event()
        self._answered: asyncio.Future[None] | None = None  # set once the last batch's refusals are answered

    async def handle_batch(self, messages: list[tuple[str, bytes]]) -> None:
        """Put a batch of (topic, payload) on the inbox, refusing the bad ones; returns when Kafka has
        every record of it (raises, and sets ``failed``, if it refused one)."""
        before = self._answered
        self._answered = answered = asyncio.get_running_loop().create_future()
        try:
            await self._handle(messages, before)
        finally:
            answered.set_result(None)

    async def _handle(self, messages: list[tuple[str, bytes]], before: asyncio.Future[None] | None) -> None:
        now = self.clock()
        requests: list[tuple[Inbound, ReportState | None]] = []
        refused: list[tuple[str, bytes, MalformedRecord]] = []
        for topic, payload in messages:
            if self.owns is not None and not self.owns(topic):
                continue  # another shard's device: acknowledged with the batch, unread
            try:
                message = translate(topic, payload, now)
            except MalformedRecord as error:
                refused.append((topic, payload, error))
                continue
            requests.append((message.request, message.answer))
            if message.refused is not None:
                refused.append((topic, payload, message.refused))
        try:
            await self.inbox.put_all(requests)
        except Exception:
            log.exception("gateway: the inbox refused a record; stopping so the batch is delivered again")
            self.failed.set()
            raise
        self.accepted += len(requests)
        if before is not None:  # even with nothing refused here: the batch after waits for this one
            await before  # the batch before answered its refusals (module docstring)
        for topic, payload, reason in refused:
            await self._refuse(topic, payload, reason)

    async def _refuse(self, topic: str, payload: bytes, error: MalformedRecord) -> None:
        device_id = _device_id(topic)
        try:
            await self.dead_letters.send(
                topic=topic,
                partition=NOT_FROM_KAFKA,
                offset=NOT_FROM_KAFKA,
                key=device_id.encode() if device_id else None,
                value=payload,
                error=error,
            )
        except Exception:
            log.exception("gateway: no dead letter written; stopping so the message is delivered again")
            self.failed.set()
            raise
        self.refused += 1
        if device_id:
            message = ErrorMessage(error=error.reason, reason=error.detail[:500], topic=topic)
            self.publish_error(errors_topic(device_id), encode_message(message))


def _device_id(topic: str) -> str | None:
    """The device a refused message came from, if its topic names a valid one."""
    try:
        return parse_topic(topic).device_id
    except MalformedRecord:
        parts = topic.split("/")
        return parts[2] if len(parts) > 2 and is_identifier(parts[2]) else None
