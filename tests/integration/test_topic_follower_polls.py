"""``TopicFollower`` on a real broker with ``after_poll`` (the automations engine flushes its sends
there): it is awaited after each poll's records were handed over, a poll holds at most ``max_records``,
``caught_up`` is set only after the poll that read the last record was flushed, and a failing
``after_poll`` stops the feed: ``wait_caught_up`` raises, ``failure`` says why, ``stop`` still stops.
``on_caught_up`` (broker access writes its first files there) runs once, after that last poll's
``after_poll`` and before ``caught_up``, also when there was nothing to read. With ``after`` (the
automations engine's journal feed after its home-journal feed), a record is handed over only once the
other follower has handed over what was written on its topic before it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from hearth_devstack.servers.kafka import KafkaBroker
from hearth_shared.adapters.kafka import ensure_topics, make_producer
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.topic_follower import TopicFollower
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RECORDS = 60


async def filled_topic(kafka: KafkaBroker) -> str:
    settings = StackSettings(
        kafka_bootstrap_servers=kafka.bootstrap, topic_prefix=f"t{uuid.uuid4().hex[:10]}"
    )
    await ensure_topics(kafka.bootstrap, settings.topics.specs())
    producer = make_producer(kafka.bootstrap, "test-follower")
    await producer.start()
    try:
        for n in range(RECORDS):
            await producer.send(settings.topics.home_journal, str(n).encode(), key=f"home-{n % 5}".encode())
        await producer.flush()
    finally:
        await producer.stop()
    return settings.topics.home_journal


async def test_after_poll_follows_each_poll_and_caught_up_waits_for_the_last_one(kafka: KafkaBroker) -> None:
    topic = await filled_topic(kafka)
    handed: list[bytes | None] = []
    polls: list[int] = []  # how many records had been handed over at each after_poll
    caught_up_before: list[bool] = []

    async def on_record(topic: str, partition: int, offset: int, value: bytes | None) -> None:
        handed.append(value)

    async def after_poll() -> None:
        polls.append(len(handed))
        caught_up_before.append(follower.caught_up.is_set())

    follower = TopicFollower(
        kafka.bootstrap, [topic], on_record, "polls", after_poll=after_poll, max_records=7
    )
    await follower.start()
    try:
        await follower.wait_caught_up()
        assert len(handed) == RECORDS and polls[-1] == RECORDS  # the last poll's after_poll came first
        assert not any(caught_up_before)
        sizes = [b - a for a, b in zip([0, *polls], polls, strict=False)]
        assert all(0 < size <= 7 for size in sizes) and len(polls) >= RECORDS // 7, sizes
        assert follower.failure() is None
    finally:
        await follower.stop()


async def test_on_caught_up_runs_once_after_the_last_poll_and_before_caught_up(kafka: KafkaBroker) -> None:
    topic = await filled_topic(kafka)
    handed: list[bytes | None] = []
    calls: list[tuple[str, int, bool]] = []  # (which, records handed over by then, caught_up set then)

    async def on_record(topic: str, partition: int, offset: int, value: bytes | None) -> None:
        handed.append(value)

    async def after_poll() -> None:
        calls.append(("after_poll", len(handed), follower.caught_up.is_set()))

    async def on_caught_up() -> None:
        calls.append(("on_caught_up", len(handed), follower.caught_up.is_set()))

    follower = TopicFollower(
        kafka.bootstrap, [topic], on_record, "caught-up", after_poll=after_poll, on_caught_up=on_caught_up
    )
    await follower.start()
    try:
        await follower.wait_caught_up()
        assert calls[-2:] == [("after_poll", RECORDS, False), ("on_caught_up", RECORDS, False)], calls
        producer = make_producer(kafka.bootstrap, "test-follower")
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"later", key=b"home-0")
        finally:
            await producer.stop()
        await eventually(lambda: calls[-1] == ("after_poll", RECORDS + 1, True), "the later record's poll")
        assert [which for which, _, _ in calls].count("on_caught_up") == 1
    finally:
        await follower.stop()


async def test_on_caught_up_runs_before_the_first_poll_when_there_is_nothing_to_read(
    kafka: KafkaBroker, broker_only: StackSettings
) -> None:
    settings = broker_only
    calls: list[str] = []

    async def on_record(topic: str, partition: int, offset: int, value: bytes | None) -> None:
        calls.append("record")

    async def after_poll() -> None:
        calls.append("after_poll")

    async def on_caught_up() -> None:
        calls.append("on_caught_up")

    follower = TopicFollower(
        kafka.bootstrap,
        [settings.topics.home_journal],
        on_record,
        "empty",
        after_poll=after_poll,
        on_caught_up=on_caught_up,
    )
    await follower.start()
    try:
        await follower.wait_caught_up()
        assert calls == ["on_caught_up"]
    finally:
        await follower.stop()


async def test_a_failing_after_poll_stops_the_feed_and_says_why(kafka: KafkaBroker) -> None:
    topic = await filled_topic(kafka)
    handed: list[bytes | None] = []

    async def on_record(topic: str, partition: int, offset: int, value: bytes | None) -> None:
        handed.append(value)

    async def after_poll() -> None:
        raise ConnectionError("the sink is gone")

    follower = TopicFollower(
        kafka.bootstrap, [topic], on_record, "failing", after_poll=after_poll, max_records=7
    )
    await follower.start()
    try:
        with pytest.raises(RuntimeError, match="stopped before it caught up"):
            await follower.wait_caught_up()
        assert isinstance(follower.failure(), ConnectionError)
        assert 0 < len(handed) <= 7 and not follower.caught_up.is_set()  # no poll after the failed one
    finally:
        await follower.stop()
    assert isinstance(follower.failure(), ConnectionError)


async def test_with_after_a_record_waits_until_the_other_follower_has_read_what_was_written_before_it(
    kafka: KafkaBroker, broker_only: StackSettings
) -> None:
    topics = broker_only.topics
    fetched, gate = asyncio.Event(), asyncio.Event()
    first_read: list[bytes | None] = []
    second_read: list[tuple[bytes | None, list[bytes | None]]] = []  # (record, what the first had read)

    async def on_first(topic: str, partition: int, offset: int, value: bytes | None) -> None:
        fetched.set()
        await gate.wait()  # the first follower is slow: it has fetched the record, not handed it over
        first_read.append(value)

    async def on_second(topic: str, partition: int, offset: int, value: bytes | None) -> None:
        second_read.append((value, list(first_read)))

    first = TopicFollower(kafka.bootstrap, [topics.home_journal], on_first, "first")
    second = TopicFollower(kafka.bootstrap, [topics.journal], on_second, "second", after=first)
    await first.start()
    await second.start()
    producer = make_producer(kafka.bootstrap, "test-follower")
    await producer.start()
    try:
        await asyncio.gather(first.wait_caught_up(), second.wait_caught_up())
        await producer.send_and_wait(topics.home_journal, b"automation", key=b"home-0")
        await asyncio.wait_for(fetched.wait(), 30)
        await producer.send_and_wait(topics.journal, b"trigger", key=b"device-0")
        asyncio.get_running_loop().call_later(1.0, gate.set)  # without ``after``, the trigger is read now
        await eventually(lambda: len(second_read) == 1, "the trigger handed over")
        assert second_read == [(b"trigger", [b"automation"])]
    finally:
        gate.set()
        await producer.stop()
        await second.stop()
        await first.stop()
