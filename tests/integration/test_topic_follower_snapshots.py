"""``TopicFollower`` with snapshots on a real broker (``hearth_shared.adapters.snapshots``'s Kafka store): a
restart restores the saved state and reads only what came after it; a state larger than one record is cut
into chunks and comes back whole; a snapshot that cannot be read is reported and the fold starts from the
first offset; and with the topic's head gone (a retention window passed), a restart from the snapshot
still has everything, while positions the window passed are counted as a gap."""

from __future__ import annotations

import hashlib
import json
import uuid
import zlib

import msgspec
import pytest

from hearth_shared.adapters.kafka import make_producer, partition_of
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.snapshots import (
    CHUNK_BYTES,
    KafkaSnapshotStore,
    Manifest,
    _chunk_key,
    _manifest_key,
)
from hearth_shared.adapters.topic_follower import SnapshotPolicy, TopicFollower
from hearth_shared.adapters.topics import PARTITIONS
from hearth_shared.schema.events import utcnow
from hearth_shared.schema.snapshot_format import NotNow
from tests.support.topics import pass_retention, produce
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class Tally:
    """The fold under test: every value seen per key, in order."""

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = {}

    async def on_record(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        key, _, text = (value or b"").decode().partition("=")
        if not text:
            raise ValueError(f"not key=value: {value!r}")  # a bad record: skipped, the feed goes on
        self.seen.setdefault(key, []).append(text)

    def snapshot(self) -> bytes:
        return msgspec.json.encode(self.seen)

    def restore(self, data: bytes) -> None:
        self.seen = msgspec.json.decode(data, type=dict[str, list[str]])

    def count(self) -> int:
        return sum(len(v) for v in self.seen.values())


async def write(settings: StackSettings, start: int, count: int, *, payload: str = "") -> None:
    records = ((f"k{n % 7}".encode(), f"k{n % 7}={n}{payload}".encode()) for n in range(start, start + count))
    await produce(settings.kafka_bootstrap_servers, settings.topics.home_journal, records)


async def follow(settings: StackSettings, tally: Tally, name: str = "tally") -> TopicFollower:
    store = KafkaSnapshotStore(settings.kafka_bootstrap_servers, settings.topics.snapshots)
    follower = TopicFollower(
        settings.kafka_bootstrap_servers,
        [settings.topics.home_journal],
        tally.on_record,
        name,
        snapshots=SnapshotPolicy(store, name, tally),
    )
    await follower.start()
    await follower.wait_caught_up()
    return follower


async def test_a_restart_reads_only_what_came_after_the_snapshot(broker_only: StackSettings) -> None:
    settings = broker_only
    await write(settings, 0, 300)
    await produce(settings.kafka_bootstrap_servers, settings.topics.home_journal, [(b"k1", b"garbage")])
    first = Tally()
    follower = await follow(settings, first)
    assert follower.restart.started_from == "first offset (no snapshot yet)"
    assert follower.restart.replayed == 301 and follower.skipped == 1 and first.count() == 300
    await follower.stop()  # a clean stop saves a snapshot

    await write(settings, 300, 40)
    second = Tally()
    follower = await follow(settings, second)
    try:
        assert follower.restart.started_from == "snapshot"
        assert follower.restart.replayed == 40  # only the tail
        assert second.count() == 340
        assert second.seen["k0"][:2] == ["0", "7"] and second.seen["k0"][-1] == "336"
        await write(settings, 340, 5)  # followed live after the restart too
        await eventually(lambda: second.count() == 345, "the records written after the restart")
    finally:
        await follower.stop()


async def test_a_state_of_many_chunks_comes_back_whole(broker_only: StackSettings) -> None:
    settings = broker_only
    # 1,280 random hex characters a value, so the compressed state still needs several chunks
    await write(settings, 0, 2000, payload="".join(uuid.uuid4().hex for _ in range(40)))
    big = Tally()
    follower = await follow(settings, big)
    await follower.save_snapshot()
    await follower.stop()
    assert len(big.snapshot()) > 3 * CHUNK_BYTES, "the state should need several chunks"

    again = Tally()
    follower = await follow(settings, again)
    try:
        assert follower.restart.started_from == "snapshot" and follower.restart.replayed == 0
        assert again.seen == big.seen
    finally:
        await follower.stop()


class Hesitant(Tally):
    """A fold that cannot be saved until ``ready`` (as automations while a decision is not on the broker)."""

    ready = False

    def snapshot(self) -> bytes:
        if not self.ready:
            raise NotNow("a decision is not on the broker yet")
        return super().snapshot()


async def test_a_fold_that_says_not_now_is_saved_later_and_no_error_is_counted(
    broker_only: StackSettings,
) -> None:
    settings = broker_only
    await write(settings, 0, 20)
    hesitant = Hesitant()
    follower = await follow(settings, hesitant, "hesitant")
    try:
        await follower.save_snapshot()
        assert (follower.restart.snapshots_saved, follower.restart.snapshot_errors) == (0, 0)
        hesitant.ready = True
        await follower.save_snapshot()
        assert (follower.restart.snapshots_saved, follower.restart.snapshot_errors) == (1, 0)
    finally:
        await follower.stop()


async def test_an_unreadable_snapshot_is_reported_and_the_fold_starts_over(
    broker_only: StackSettings,
) -> None:
    settings = broker_only
    await write(settings, 0, 50)
    follower = await follow(settings, Tally())
    await follower.stop()
    store = KafkaSnapshotStore(settings.kafka_bootstrap_servers, settings.topics.snapshots)
    await store.save("tally", b"{not json", {}, 0)  # a state the fold cannot restore
    await store.close()

    tally = Tally()
    follower = await follow(settings, tally)
    try:
        assert follower.restart.started_from.startswith("first offset (snapshot unreadable")
        assert follower.restart.replayed == 50 and tally.count() == 50
    finally:
        await follower.stop()


async def test_with_the_head_gone_the_snapshot_keeps_everything_and_a_passed_one_is_a_gap(
    broker_only: StackSettings,
) -> None:
    settings = broker_only
    topic = settings.topics.home_journal
    await write(settings, 0, 120)
    kept = Tally()
    follower = await follow(settings, kept)
    await follower.stop()

    await pass_retention(settings.kafka_bootstrap_servers, topic)  # every fact the snapshot holds
    await write(settings, 120, 10)
    after = Tally()
    follower = await follow(settings, after)
    try:
        assert follower.restart.started_from == "snapshot" and follower.restart.gap == 0
        assert after.count() == 130 and follower.restart.replayed == 10
    finally:
        await follower.stop()  # saves at 130

    await write(settings, 130, 20)
    await pass_retention(settings.kafka_bootstrap_servers, topic)  # 20 facts the snapshot lacks, gone
    lost = Tally()
    follower = await follow(settings, lost)
    try:
        assert follower.restart.gap == 20 and lost.count() == 130
        assert json.loads(json.dumps(follower.restart.as_json()))["gap"] == 20
    finally:
        await follower.stop()


async def test_two_writers_of_one_name_interleaved_leave_the_last_manifest_whole(
    broker_only: StackSettings,
) -> None:
    """Two processes of one part save under one name (CI saw it: the command API's and the query API's
    campaign feeds): one's chunks, then the other's whole save, then the first's manifest. The last
    manifest names chunks that stand before the other's save, and loading finds them."""
    settings = broker_only
    topic = settings.topics.snapshots
    first = KafkaSnapshotStore(settings.kafka_bootstrap_servers, topic)
    second = KafkaSnapshotStore(settings.kafka_bootstrap_servers, topic)
    state = b"the first writer's state"
    partition = partition_of(b"shared", PARTITIONS)
    producer = make_producer(settings.kafka_bootstrap_servers, "tests")
    await producer.start()
    try:
        await producer.send_and_wait(
            topic, zlib.compress(state, 1), key=_chunk_key("shared", "first", 0), partition=partition
        )
        await second.save("shared", b"the second writer's state", {}, 2)  # lands between
        manifest = Manifest(
            name="shared", snapshot_id="first", taken_at=utcnow(), positions={}, chunks=1, size=len(state),
            sha256=hashlib.sha256(state).hexdigest(), records=1,
        )  # fmt: skip
        await producer.send_and_wait(
            topic, msgspec.msgpack.encode(manifest), key=_manifest_key("shared"), partition=partition
        )
        loaded = await first.load("shared")
        assert loaded is not None and loaded.state == state and loaded.manifest.snapshot_id == "first"
    finally:
        await producer.stop()
        await first.close()
        await second.close()
