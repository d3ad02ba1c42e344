"""Writing records and facts to a test's topics, and reading its journal (or any topic, e.g. the campaigns
topic) whole (for tests that count facts: each fact once, versions 1..N)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TypeVar

import msgspec
from aiokafka import AIOKafkaConsumer

from hearth_shared.adapters.kafka import make_producer, topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.snapshots import Manifest
from hearth_shared.schema.campaign_events import CampaignFact, decode_campaign_fact
from hearth_shared.schema.events import Event, MalformedRecord, decode_event, encode
from tests.support.waiting import eventually

Record = TypeVar("Record")


async def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
    """Send the ``(key, value)`` records in order; returns once the broker has every one (acks=all)."""
    producer = make_producer(bootstrap, "tests")
    await producer.start()
    try:
        futures = [await producer.send(topic, value, key=key) for key, value in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def produce_facts(settings: StackSettings, facts: Iterable[Event]) -> None:
    """Append facts to the test's journal, keyed by device like the actor's."""
    await produce(
        settings.kafka_bootstrap_servers,
        settings.topics.journal,
        ((f.device_id.encode(), encode(f)) for f in facts),
    )


async def produce_facts_at_their_time(settings: StackSettings, facts: Iterable[Event]) -> None:
    """Like ``produce_facts``, with each record's Kafka timestamp its fact's ``recorded_at`` (as the
    actor's records have, give or take its send): for readers that select a stretch by record time."""
    producer = make_producer(settings.kafka_bootstrap_servers, "tests")
    await producer.start()
    try:
        futures = [
            await producer.send(
                settings.topics.journal,
                encode(f),
                key=f.device_id.encode(),
                timestamp_ms=int(f.recorded_at.timestamp() * 1000),
            )
            for f in facts
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def read_journal(
    settings: StackSettings, timeout_s: float = 30.0, *, skip_unreadable: bool = False
) -> list[Event]:
    """Every fact in the journal now, in offset order per partition (up to the end offsets at the call).
    ``skip_unreadable``: leave out records that are not facts, for a test on the session's shared journal,
    where the poison tests plant such records on purpose."""
    if not skip_unreadable:
        return await read_topic(settings, settings.topics.journal, decode_event, timeout_s)

    def readable(value: bytes | None) -> Event | None:
        try:
            return decode_event(value or b"")
        except MalformedRecord:
            return None

    found = await read_topic(settings, settings.topics.journal, readable, timeout_s)
    return [fact for fact in found if fact is not None]


async def read_campaign_facts(settings: StackSettings, timeout_s: float = 30.0) -> list[CampaignFact]:
    """Every campaign fact now (one partition: in the order the driver recorded them)."""
    return await read_topic(settings, settings.topics.campaigns, decode_campaign_fact, timeout_s)


async def read_topic(
    settings: StackSettings, topic: str, decode: Callable[[bytes | None], Record], timeout_s: float = 30.0
) -> list[Record]:
    """Every record of ``topic`` now, decoded, in offset order per partition (up to the end offsets)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    found: list[Record] = []
    try:
        tps = await topic_partitions(consumer, topic)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        left = {tp for tp in tps if ends[tp] > 0}

        async def read_to_end() -> bool:
            for tp, records in (await consumer.getmany(*left, timeout_ms=500)).items():
                found.extend(decode(r.value) for r in records if r.offset < ends[tp])
            for tp in list(left):
                if await consumer.position(tp) >= ends[tp]:
                    left.discard(tp)
            return not left

        if left:
            await eventually(read_to_end, f"{topic} read to its end", timeout_s=timeout_s, every_s=0)
    finally:
        await consumer.stop()
    return found


async def pass_retention(bootstrap: str, topic: str, before: dict[int, int] | None = None) -> dict[int, int]:
    """Delete every record of ``topic`` there is now (or, given ``before``, each partition's records
    before that offset), as a retention window passing over them does (Kafka's DeleteRecords moves each
    partition's head there); returns the new heads."""
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        partitions = await topic_partitions(consumer, topic)
        ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
    if before is not None:
        ends = {tp: before[tp.partition] for tp in ends if tp.partition in before}
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_records({tp: RecordsToDelete(end) for tp, end in ends.items() if end > 0})
    finally:
        await admin.close()
    return {tp.partition: end for tp, end in ends.items()}


async def snapshot_manifests(settings: StackSettings) -> dict[str, Manifest]:
    """The latest snapshot manifest of every fold on the stack's snapshots topic, by fold name."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    manifests: dict[str, Manifest] = {}
    try:
        partitions = await topic_partitions(consumer, settings.topics.snapshots)
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    if (record.key or b"").startswith(b"m/") and record.value is not None:
                        manifest = msgspec.msgpack.decode(record.value, type=Manifest)
                        manifests[manifest.name] = manifest
    finally:
        await consumer.stop()
    return manifests
