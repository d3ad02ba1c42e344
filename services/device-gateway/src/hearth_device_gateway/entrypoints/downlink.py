"""Hearth -> device: dispatched commands from the device-bound topic become QoS 1 messages on each
device's ``commands`` topic.

The gateways share the device-bound topic's partitions as one Kafka consumer group. A batch's offsets
are committed only after the broker has acknowledged every message of the batch (their PUBACKs): a
gateway killed before that leaves the offsets where they were, and whoever takes the partitions over
publishes the batch again. A device may so see a command twice; its ``command_id`` says so, and the
device actor decides a second ack of it as nothing. If the MQTT session is lost with messages still
unacknowledged, the batch is read again from its first offset.

Offsets are committed at most every ``COMMIT_EVERY_S`` (and at once when the topic goes quiet or the
gateway stops), not after every batch: an OffsetCommit is a write on the broker, and at a command per
batch it was one more broker request per command. Only offsets whose messages the broker acknowledged
are ever committed, so this only widens what a killed gateway's successor sends again (a device sees
such a command twice, as above).

A command already past its ``expires_at`` is not sent (the device actor expires it anyway), so a
gateway starting with a backlog does not flood devices with stale commands. Nor is a command of another
MQTT shard's device (its ``shard``): each shard's gateways are a consumer group of their own over the
same topic, and each publishes its own shard's commands on its broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import CommitFailedError

from hearth_shared.adapters.kafka import DeadLetters
from hearth_shared.adapters.mqtt_link import SessionLost
from hearth_shared.schema.events import DeviceCommand, MalformedRecord, decode_device_command, utcnow
from hearth_shared.schema.mqtt import CommandMessage, commands_topic, encode_message
from hearth_shared.schema.shards import DEFAULT_SHARD

log = logging.getLogger(__name__)

PublishConfirmed = Callable[[str, bytes], "asyncio.Future[None]"]
MAX_RECORDS = 1000
COMMIT_EVERY_S = 0.25


class Downlink:
    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        publish: PublishConfirmed,
        dead_letters: DeadLetters,
        *,
        shard: str = DEFAULT_SHARD,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.consumer = consumer
        self.shard = shard
        self.publish = publish
        self.dead_letters = dead_letters
        self.clock = clock
        self.sent = 0
        self.stale = 0
        self._confirmed: dict[TopicPartition, int] = {}  # acknowledged by the broker, not committed yet
        self._last_commit = time.monotonic()

    async def run(self) -> None:
        try:
            while True:
                batches = await self.consumer.getmany(timeout_ms=500, max_records=MAX_RECORDS)
                if batches:
                    await self._deliver(batches)
                if self._confirmed and (
                    not batches or time.monotonic() - self._last_commit >= COMMIT_EVERY_S
                ):
                    await self._commit()
        finally:
            if self._confirmed:  # stopping: what was delivered is not sent again by the next owner
                try:
                    await self._commit()
                except Exception:  # the next owner sends those commands again; the stop goes on
                    log.exception("gateway: device-command offsets not committed on stop")

    async def _deliver(self, batches: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]) -> None:
        now = self.clock()
        acknowledged: list[asyncio.Future[None]] = []
        for records in batches.values():
            for record in records:
                command = await self._decode(record)
                if command is None or command.shard != self.shard:
                    continue
                if command.expires_at <= now:
                    self.stale += 1
                    continue
                acknowledged.append(self.publish(commands_topic(command.device_id), _message(command)))
        try:
            await asyncio.gather(*acknowledged)
        except SessionLost:
            log.warning("gateway: MQTT session lost with commands unacknowledged; sending the batch again")
            for tp, records in batches.items():
                self.consumer.seek(tp, records[0].offset)
            return
        self.sent += len(acknowledged)
        self._confirmed.update({tp: records[-1].offset + 1 for tp, records in batches.items()})

    async def _commit(self) -> None:
        offsets, self._confirmed = self._confirmed, {}
        self._last_commit = time.monotonic()
        assigned = self.consumer.assignment()
        offsets = {tp: offset for tp, offset in offsets.items() if tp in assigned}
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except CommitFailedError as error:  # partitions moved on: their new owner sends them again
            log.warning("gateway: device-command offsets not committed (%s)", error)

    async def _decode(self, record: ConsumerRecord[bytes, bytes]) -> DeviceCommand | None:
        try:
            return decode_device_command(record.value or b"")
        except MalformedRecord as error:
            await self.dead_letters.send(
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
                key=record.key,
                value=record.value,
                error=error,
            )
            return None


def _message(command: DeviceCommand) -> bytes:
    return encode_message(
        CommandMessage(
            command_id=command.command_id,
            name=command.name,
            params=command.params,
            expires_at=command.expires_at,
        )
    )
