"""The automations service's composition root: ``make_app(settings, *, journal=None, clock=None)``.

Nothing connects at import or in ``make_app``; ``AutomationsService.start()`` starts the producer, reads
the home journal to its end, then the device journal (so holds made while it was down are known before
anything fires), and only then ticks (the scheduler's transitions, the engine's for_s timers and time
triggers: what the replay left pending fires at the first tick, once). ``run()`` serves until
cancelled; a heartbeat file written every tick is what ``python -m hearth_automations.probe`` checks.

The journal feed hands the engine each poll's records (``Engine.evaluate``), then flushes their effects
(``Engine.flush``: the commands, acked, then the run facts). A flush that fails stops the feed and then
``run()`` with the error, so the process exits and its supervisor restarts it: the engine had decided
runs the journals do not hold, and only the replay at start-up makes its state true again.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import httpx

from hearth_automations.engine import Engine
from hearth_automations.notifier import Notifier
from hearth_automations.scheduler import Scheduler
from hearth_automations.settings import AutomationsSettings
from hearth_automations.webhooks import WebhookSender
from hearth_shared.events import CommandRequested as CommandRequestedFact
from hearth_shared.events import MalformedRecord, SubmitCommand, fact_type, utcnow, wire_name
from hearth_shared.home_facts import HomeFact, decode_home_fact
from hearth_shared.home_journal import append_home_fact, append_home_facts
from hearth_shared.home_view import HomesView
from hearth_shared.kafka import KafkaJournal, partition_of
from hearth_shared.storable import decode_fact
from hearth_shared.topic_follower import TopicFollower
from hearth_shared.topics import PARTITIONS

log = logging.getLogger(__name__)

_REQUESTED = wire_name(CommandRequestedFact)


class KafkaCommandPath:
    """The scheduler's and the engine's effects on Kafka: command requests on the inbox (the command
    API's path, the same ``KafkaJournal.submit``), their own facts on the home journal. One at a time
    (the scheduler, the notifier) or many at once (the engine's flush: sent together, then awaited)."""

    def __init__(self, journal: KafkaJournal) -> None:
        self.journal = journal

    async def submit(self, request: SubmitCommand) -> None:
        await self.journal.submit(request)

    async def append(self, fact: HomeFact) -> None:
        await append_home_fact(self.journal.producer, self.journal.topics, fact)

    async def submit_all(self, requests: Sequence[SubmitCommand]) -> None:
        await self.journal.submit(*requests)

    async def append_all(self, facts: Sequence[HomeFact]) -> None:
        await append_home_facts(self.journal.producer, self.journal.topics, facts)


class AutomationsService:
    def __init__(self, settings: AutomationsSettings, journal: KafkaJournal, clock: Callable[[], datetime]):
        self.settings = settings
        self.journal = journal
        stack = settings.stack
        view = HomesView()
        self.scheduler = Scheduler(
            view,
            KafkaCommandPath(journal),
            owns=self.owns,
            clock=clock,
            expires_in_s=settings.command_expires_in_s,
        )
        self.http = httpx.AsyncClient(timeout=settings.webhook_timeout_s)
        sender = WebhookSender(
            self.http,
            attempts=settings.webhook_attempts,
            backoff_s=settings.webhook_backoff_s,
            max_backoff_s=settings.webhook_max_backoff_s,
        )
        path = KafkaCommandPath(journal)
        self.notifier = Notifier(view, path, sender, clock)
        self.engine = Engine(
            view,
            path,
            self.notifier,
            owns=self.owns,
            clock=clock,
            expires_in_s=settings.command_expires_in_s,
            defaults=settings.default_automations,
        )
        self.homes_feed = TopicFollower(
            stack.kafka_bootstrap_servers, [stack.topics.home_journal], self._home_record, "home-journal"
        )
        self.journal_feed = TopicFollower(
            stack.kafka_bootstrap_servers, [stack.topics.journal], self._journal_record, "journal",
            after_poll=self.engine.flush, max_records=settings.poll_records,
        )  # fmt: skip
        self.heartbeat = Path(settings.heartbeat_file) if settings.heartbeat_file else None

    def owns(self, home_id: str) -> bool:
        share = self.settings.instances
        return share == 1 or partition_of(home_id.encode(), PARTITIONS) % share == self.settings.instance

    async def _home_record(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        try:
            fact = decode_home_fact(value)
        except MalformedRecord as error:
            log.warning("skipping %s[%d]@%d: %s", topic, partition, offset, error)
            return
        await self.scheduler.on_home_fact(fact)

    async def _journal_record(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        try:
            event = decode_fact(value)
        except MalformedRecord as error:  # the projector dead-letters it; here it is only skipped
            log.warning("skipping %s[%d]@%d: %s", topic, partition, offset, error)
            return
        if fact_type(value) == _REQUESTED:
            await self.scheduler.on_journal_fact(event)
        await self.engine.evaluate(event)

    async def start(self) -> None:
        await self.journal.start()
        await self.homes_feed.start()
        await self.homes_feed.caught_up.wait()
        await self.journal_feed.start()
        await self.journal_feed.wait_caught_up()
        await self.scheduler.go_live()
        self.engine.live = True
        self.engine.undelivered()
        log.info("automations instance %d/%d live", self.settings.instance, self.settings.instances)

    async def stop(self) -> None:
        await self.notifier.stop()
        await self.http.aclose()
        await self.journal_feed.stop()
        await self.homes_feed.stop()
        await self.journal.stop()

    async def run(self) -> None:
        await self.start()
        # The process's state, as replayed, is long-lived: out of the collector's full passes, which
        # walked all of it (about 0.15 s a pass with 10,000 automations, a stall of every run in flight).
        gc.collect()
        gc.freeze()
        try:
            while True:
                failure = self.journal_feed.failure()
                if failure is not None:
                    raise RuntimeError("the journal feed stopped: restart to replay") from failure
                await self.scheduler.tick()
                await self.engine.tick()  # for_s timers and time triggers
                if self.heartbeat is not None:
                    self.heartbeat.touch()
                await asyncio.sleep(self.settings.tick_s)
        finally:
            with contextlib.suppress(Exception):
                await self.stop()


def make_app(
    settings: AutomationsSettings | None = None,
    *,
    journal: KafkaJournal | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> AutomationsService:
    settings = settings or AutomationsSettings()
    stack = settings.stack
    journal = journal or KafkaJournal(stack.kafka_bootstrap_servers, stack.topics, client_id="automations")
    return AutomationsService(settings, journal, clock)
