"""``RevocationFeed`` on a real broker: it reads every revocation there is before it says ``caught_up``
(the APIs' /healthz waits for that), also when the topic's last offset holds no record it can read (here a
transaction's commit marker, which a consumer never sees, as it never sees records compaction removed);
a tombstone or an unreadable record is skipped and the feed goes on; a revocation written later is in the
set within moments."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from hearth_devstack.servers.kafka import KafkaBroker
from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.adapters.revocations import RevocationFeed, publish_revocation, revoke
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.auth import Revocations
from hearth_shared.schema.revocations import token_revoked
from tests.support.topics import produce
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def end_offset(bootstrap: str, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        [partition] = await topic_partitions(consumer, topic)
        return int((await consumer.end_offsets([partition]))[partition])
    finally:
        await consumer.stop()


async def test_the_feed_reads_every_revocation_before_it_is_caught_up_and_follows_the_topic(
    kafka: KafkaBroker, broker_only: StackSettings
) -> None:
    settings = broker_only
    topic = settings.topics.token_revocations
    await revoke(kafka.bootstrap, settings.topics, token_revoked("tok-first", reason="lost", by="cli"))
    await produce(kafka.bootstrap, topic, [(b"tok-gone", None), (b"tok-bad", b"not a revocation")])
    transactional = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, transactional_id=f"t-{uuid.uuid4()}")
    await transactional.start()
    try:
        async with transactional.transaction():
            await publish_revocation(transactional, settings.topics, token_revoked("tok-last"))
    finally:
        await transactional.stop()

    async def marker_written() -> bool:  # the coordinator writes it just after the commit returns
        return await end_offset(kafka.bootstrap, topic) == 5  # 4 records and the marker, read by no one

    await eventually(marker_written, "the transaction's commit marker", timeout_s=10)

    revocations = Revocations()
    feed = RevocationFeed(kafka.bootstrap, settings.topics, revocations)
    await feed.start()
    try:
        await asyncio.wait_for(feed.caught_up.wait(), 30)
        assert revocations.ids == {"tok-first", "tok-last"}  # the tombstone and the bad record skipped
        await revoke(kafka.bootstrap, settings.topics, token_revoked("tok-later"))
        await eventually(lambda: "tok-later" in revocations, "the later revocation", timeout_s=10)
    finally:
        await feed.stop()
