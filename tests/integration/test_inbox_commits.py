"""A device-actor worker keeps its inbox commits alive while its inbox is quiet (inbox.py, "Kept offsets").

Kafka expires the offsets of a group that never subscribes, as the worker's inbox group, a retention
period after their last commit. A partition with no request for that long would lose its commit, and its
next owner would catch its twins up from the journal partition's first offset. So a worker re-commits
the offsets it holds, with the journal's end then, every ``recommit_after_s`` even when it handled
nothing. Seen here on the real broker: with no request handled after the first, the commit's journal
offset still moves to the journal's new end (another writer's record), and the inbox offset stays.
"""

from __future__ import annotations

import uuid

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from hearth_device_actor.adapters.catch_up import journal_offset_from
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.adapters.settings import StackSettings
from tests.support.inbox_requests import register_request
from tests.support.inbox_worker import Worker, submit
from tests.support.waiting import poll_until

pytestmark = pytest.mark.integration


async def inbox_commits(settings: StackSettings, group: str) -> dict[TopicPartition, tuple[int, int | None]]:
    """The group's committed inbox offsets and the journal offset each recorded."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {tp: (meta.offset, journal_offset_from(meta.metadata or "")) for tp, meta in offsets.items()}


async def test_a_quiet_worker_renews_its_inbox_commits(broker_only: StackSettings) -> None:
    settings = broker_only
    group = f"once-{settings.topic_prefix}"  # the Worker's inbox group
    worker = Worker(settings, {}, catch_up=False, commit_interval_s=0.1, recommit_after_s=0.5)
    await worker.start()
    try:
        await submit(settings, [register_request(f"kept-{uuid.uuid4().hex[:6]}", home_id="kept")])
        await worker.handled(1)
        first = await poll_until(lambda: inbox_commits(settings, group), bool, "the registration's commit")
        [(lane, (offset, journal))] = first.items()
        assert offset == 1 and journal is not None and journal > 0  # its facts are in the journal

        producer = make_producer(settings.kafka_bootstrap_servers, "another-writer")
        await producer.start()
        try:
            await producer.send_and_wait(settings.topics.journal, b"{}", partition=lane.partition)
        finally:
            await producer.stop()

        renewed = await poll_until(
            lambda: inbox_commits(settings, group),
            lambda commits: commits.get(lane, (0, 0))[1] == journal + 1,
            "the same inbox offset committed again with the journal's new end",
        )
        assert renewed == {lane: (1, journal + 1)}  # nothing handled: the inbox offset did not move
        assert worker.actors.processed == 1
    finally:
        await worker.stop()
