"""Every journal fact once, also when a device-actor worker dies between appending facts and committing
its inbox offsets (the window issue 9 found duplicates in).

The crash is made exact rather than timed: a worker handles a batch (its facts reach the real journal),
then stops without committing, and its successor starts from the twins as the changelog had them at the
last commit. With the journal catch-up the successor appends nothing twice; without it, the same crash
appends the same facts again (the second test shows the check can fail).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest
from aiokafka import AIOKafkaConsumer

from hearth_device_actor.actor import DeviceActors
from hearth_device_actor.app import KafkaOutbox
from hearth_device_actor.catch_up import JournalCatchUp
from hearth_device_actor.inbox import InboxFeed
from hearth_shared.adapters.kafka import KafkaWriter, make_producer
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.topics import PARTITIONS
from hearth_shared.schema.events import Inbound, SubmitCommand, encode
from tests.support.inbox_requests import command_request, register_request, report_request
from tests.support.topics import read_journal
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

DEVICES = 8


def requests_for(devices: list[str], seqs: range, *, register: bool) -> list[Inbound]:
    out: list[Inbound] = []
    for device_id in devices:
        if register:
            out.append(register_request(device_id, home_id="once"))
        for seq in seqs:
            out.append(
                report_request(device_id, seq, ambient_c=20.0 + seq / 10, hvac_mode="heat", target_c=20.0)
            )
    return out


def command_for(device_id: str) -> SubmitCommand:
    return command_request(
        device_id, "set_target_temperature", {"target_c": 22.5}, home_id="once", expires_in_s=365 * 24 * 3600
    )


class Worker:
    """One device-actor worker's hot path on the real broker, with a plain dict as its changelog."""

    def __init__(self, settings: StackSettings, twins: dict[bytes, bytes], *, catch_up: bool) -> None:
        self.journal = KafkaWriter(settings.kafka_bootstrap_servers, settings.topics, client_id="once")
        self.actors = DeviceActors(twins, KafkaOutbox(self.journal), offline_after_s=3600)
        servers = settings.kafka_bootstrap_servers
        reader = JournalCatchUp(
            lambda: AIOKafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False),
            settings.topics.journal,
            self.actors.catch_up,
        )
        self.feed = InboxFeed(
            lambda: AIOKafkaConsumer(
                bootstrap_servers=servers, group_id=f"once-{settings.topic_prefix}", enable_auto_commit=False
            ),
            settings.topics.inbox_lanes,
            self.actors.handle_batch,
            _nothing_to_flush,
            asyncio.Lock(),
            batch_size=500,
            commit_interval_s=3600,  # commits only when the test says so
            journal_topic=settings.topics.journal,
            catch_up=reader.run if catch_up else _no_catch_up,
        )
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.journal.start()
        await self.feed.assign(set(range(PARTITIONS)))
        self.task = asyncio.create_task(self.feed.run())

    async def handled(self, count: int) -> None:
        await eventually(lambda: self.actors.processed >= count, f"{count} requests handled")

    async def commit(self) -> None:
        await self.feed.revoke()  # commits what was handled (with the journal offsets) and stops reading
        await self.feed.assign(set(range(PARTITIONS)))

    async def crash(self) -> None:
        """Stop with no commit and no goodbye, like kill -9 right after the facts were appended."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.feed.consumer.stop()
        await self.journal.stop()

    async def stop(self) -> None:
        await self.crash()


async def _nothing_to_flush() -> None:
    return None


async def _no_catch_up(since: dict[int, int]) -> int:
    return 0


async def submit(settings: StackSettings, requests: list[Inbound]) -> None:
    producer = make_producer(settings.kafka_bootstrap_servers, "once-fleet")
    await producer.start()
    try:
        for request in requests:
            lane = settings.topics.lane_of(request)
            await producer.send(lane, encode(request), key=request.device_id.encode())
        await producer.flush()
    finally:
        await producer.stop()


async def crash_between_append_and_commit(
    settings: StackSettings, *, catch_up: bool
) -> Counter[tuple[str, int]]:
    """Returns how often each (device, version) is in the journal after the crash and the takeover."""
    devices = [f"once-{uuid.uuid4().hex[:6]}-{i}" for i in range(DEVICES)]
    changelog: dict[bytes, bytes] = {}
    first = Worker(settings, changelog, catch_up=catch_up)
    await first.start()
    try:
        # Registered first, as the API does before a device has credentials: the registrations travel
        # on the command lane and the reports on telemetry, and the lanes are not ordered one against
        # the other (a report of a device not registered yet is ignored).
        registered = requests_for(devices, range(0), register=True)
        await submit(settings, registered)
        await first.handled(len(registered))
        committed = [*registered, *requests_for(devices, range(1, 4), register=False)]
        await submit(settings, committed[len(registered) :])
        await first.handled(len(committed))
        await first.commit()
        at_commit = dict(changelog)  # what the changelog holds once this commit's twins are flushed

        uncommitted = [*requests_for(devices, range(4, 8), register=False), command_for(devices[0])]
        await submit(settings, uncommitted)
        await first.handled(len(committed) + len(uncommitted))  # their facts are in the journal now
    finally:
        await first.crash()

    second = Worker(settings, at_commit, catch_up=catch_up)
    await second.start()  # assigned: reads the uncommitted requests again
    try:
        await second.handled(len(uncommitted))
        await second.commit()
    finally:
        await second.stop()
    events = await read_journal(settings, timeout_s=30)
    return Counter((e.device_id, e.version) for e in events if e.device_id in devices)


async def test_a_worker_killed_before_its_commit_leaves_every_fact_once(stack: StackSettings) -> None:
    copies = await crash_between_append_and_commit(stack, catch_up=True)
    doubled = {key: n for key, n in copies.items() if n > 1}
    assert not doubled, f"facts appended twice: {sorted(doubled)[:10]}"
    by_device: dict[str, list[int]] = {}
    for device_id, version in copies:
        by_device.setdefault(device_id, []).append(version)
    assert len(by_device) == DEVICES
    for device_id, versions in by_device.items():
        assert sorted(versions) == list(range(1, len(versions) + 1)), f"{device_id}: a gap"
        assert len(versions) >= 1 + 7, f"{device_id}: registration and 7 reports expected"


async def test_without_the_catch_up_the_same_crash_doubles_facts(stack: StackSettings) -> None:
    copies = await crash_between_append_and_commit(stack, catch_up=False)
    assert any(n > 1 for n in copies.values()), "the crash window did not double anything: test is blind"
