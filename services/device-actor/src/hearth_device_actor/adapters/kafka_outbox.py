"""The actors' ``Outbox`` on Kafka (``KafkaOutbox``): a batch's facts to the journal and its dispatched
commands to the device-bound topic, sent at once and returned from only when the broker has every one
(acks=all, idempotent producer), since the twins are written only after that; bad records to the dead
letters."""

from __future__ import annotations

import asyncio

from hearth_device_actor.service.actor import InboxRecord
from hearth_shared.adapters.kafka import DeadLetters, KafkaWriter, send_batched
from hearth_shared.schema.events import DeviceCommand, Event, encode


class KafkaOutbox:
    """Appends facts to the journal, dispatches commands to devices, dead-letters bad records."""

    def __init__(self, journal: KafkaWriter) -> None:
        self.journal = journal
        self.dead_letters = DeadLetters(journal, consumer="device-actor")

    async def send(self, events: list[Event], commands: list[DeviceCommand]) -> None:
        producer, topics = self.journal.producer, self.journal.topics
        futures = await send_batched(
            producer, topics.journal, ((e.device_id.encode(), encode(e)) for e in events)
        )
        if commands:
            futures += await send_batched(
                producer, topics.device_commands, ((c.device_id.encode(), encode(c)) for c in commands)
            )
        await asyncio.gather(*futures)

    async def dead_letter(self, record: InboxRecord, error: Exception) -> None:
        await self.dead_letters.send(
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            key=record.key,
            value=record.value,
            error=error,
        )
