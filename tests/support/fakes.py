"""Fakes for the seams the code offers, shared by the unit tests: the device actors' ``Outbox``, a
clock that stands still until a test moves it, the command API's ``TopicWriter`` and journal feed
(``hearth_command_api.service.ports``), the scheduler's and the automation engine's command paths and the
notifier, and the record-batch side of a Kafka producer (the gateway's inbox writer)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from hearth_device_actor.service.actor import InboxRecord
from hearth_shared.adapters.topic_follower import RestartReport
from hearth_shared.domain.home_facts import HomeFact
from hearth_shared.schema.campaign_events import CampaignRequest
from hearth_shared.schema.events import DeviceCommand, Event, Inbound, MalformedRecord, SubmitCommand
from hearth_shared.schema.revocations import TokenRevoked


class FakeOutbox:
    """Records what the actors send and dead-letter; ``fail`` makes ``send`` raise (a broker gone)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.commands: list[DeviceCommand] = []
        self.dead: list[tuple[InboxRecord, Exception]] = []
        self.fail = False

    async def send(self, events: list[Event], commands: list[DeviceCommand]) -> None:
        if self.fail:
            raise ConnectionError("broker unreachable")
        self.events += events
        self.commands += commands

    async def dead_letter(self, record: InboxRecord, error: Exception) -> None:
        self.dead.append((record, error))

    @property
    def letters(self) -> list[tuple[int, str]]:
        """(offset, reason) of each dead letter."""
        return [
            (r.offset, e.reason if isinstance(e, MalformedRecord) else type(e).__name__) for r, e in self.dead
        ]


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class FakeTopicWriter:
    """Records the requests and revocations the command API writes; ``sent`` is set by the first."""

    def __init__(self) -> None:
        self.requests: list[Inbound] = []
        self.revocations: list[TokenRevoked] = []
        self.home_facts: list[HomeFact] = []
        self.campaign_requests: list[CampaignRequest] = []
        self.sent = asyncio.Event()

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send_request(self, request: Inbound) -> None:
        self.requests.append(request)
        self.sent.set()

    async def revoke(self, fact: TokenRevoked) -> None:
        self.revocations.append(fact)

    async def append_home(self, fact: HomeFact) -> None:
        self.home_facts.append(fact)

    async def request_campaign(self, key: str, request: CampaignRequest) -> None:
        self.campaign_requests.append(request)


class FakeFeed:
    """A journal feed that has caught up (``caught_up`` cleared: one still reading)."""

    def __init__(self) -> None:
        self.caught_up = asyncio.Event()
        self.caught_up.set()
        self.restart = RestartReport()

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class FakeSchedulerPath:
    """The scheduler's effects (``hearth_automations.service.scheduler.CommandPath``), recorded in order."""

    def __init__(self) -> None:
        self.requests: list[SubmitCommand] = []
        self.facts: list[HomeFact] = []

    async def send_request(self, request: SubmitCommand) -> None:
        self.requests.append(request)

    async def append(self, fact: HomeFact) -> None:
        self.facts.append(fact)


class FakeEnginePath:
    """The automation engine's effects: command requests (the inbox) and home facts, recorded, and
    ``written``: both in the order they were written, one list per write. ``fail_send`` /
    ``fail_append``: the next such write raises it and writes nothing."""

    def __init__(self) -> None:
        self.requests: list[SubmitCommand] = []
        self.facts: list[HomeFact] = []
        self.written: list[list[SubmitCommand] | list[HomeFact]] = []
        self.fail_send: Exception | None = None
        self.fail_append: Exception | None = None

    async def send_requests(self, requests: Sequence[SubmitCommand]) -> None:
        await asyncio.sleep(0)  # a broker's round trip: other tasks run meanwhile
        if self.fail_send is not None:
            error, self.fail_send = self.fail_send, None
            raise error
        self.requests.extend(requests)
        self.written.append(list(requests))

    async def append_all(self, facts: Sequence[HomeFact]) -> None:
        await asyncio.sleep(0)
        if self.fail_append is not None:
            error, self.fail_append = self.fail_append, None
            raise error
        self.facts.extend(facts)
        self.written.append(list(facts))


class FakeNotify:
    """The notifier: the notification ids enqueued, in order."""

    def __init__(self) -> None:
        self.sent: list[uuid.UUID] = []

    def enqueue(self, home_id: str, notification_id: uuid.UUID, content: dict[str, Any]) -> None:
        self.sent.append(notification_id)


class FakeRecordBatch:
    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes]] = []

    def append(self, *, key: bytes, value: bytes, timestamp: Any) -> int:
        self.records.append((key, value))
        return len(self.records)


class FakeBatchProducer:
    """The record-batch side of aiokafka's producer (``create_batch``, ``send_batch``): hands out batches
    and records each sent one with its topic and a future the test resolves or fails (the broker's
    answer)."""

    def __init__(self) -> None:
        self.sent: list[tuple[FakeRecordBatch, asyncio.Future[None]]] = []
        self.topics: list[str] = []

    def create_batch(self) -> FakeRecordBatch:
        return FakeRecordBatch()

    async def send_batch(self, batch: FakeRecordBatch, topic: str, *, partition: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.sent.append((batch, future))
        self.topics.append(topic)
        return future

    def answer(self, error: Exception | None = None) -> None:
        """Answer every batch not answered yet: stored, or refused with ``error``."""
        for _, future in self.sent:
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

    def stored(self, topic: str) -> list[tuple[bytes, bytes]]:
        """The records of ``topic`` in the batches the broker stored, in the order they were sent."""
        return [
            record
            for (batch, future), sent_to in zip(self.sent, self.topics, strict=True)
            if sent_to == topic and future.done() and future.exception() is None
            for record in batch.records
        ]
