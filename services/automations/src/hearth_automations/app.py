"""The automations service's composition root: ``make_app(settings, *, writer=None, clock=None)``.

Nothing connects at import or in ``make_app``; ``AutomationsService.start()`` starts the producer,
restores the latest snapshot, reads the home journal to its end, then the device journal (so holds
made while it was down are known before anything fires), and only then ticks (the scheduler's
transitions, the engine's for_s timers and time triggers: what the replay left pending fires at the
first tick, once). ``run()`` serves until cancelled (``python -m hearth_automations`` cancels it on
SIGTERM or SIGINT, so a clean stop saves a snapshot); a heartbeat file written every tick is what
``python -m hearth_automations.probe`` checks.

The journal feed hands the engine each poll's records (``Engine.evaluate``), then flushes their effects
(``Engine.settle``: the commands, acked, then the run facts). A flush that fails stops the feed and then
``run()`` with the error, so the process exits and its supervisor restarts it: the engine had decided
runs the journals do not hold, and only the replay at start-up makes its state true again.

**Restart from a snapshot.** One snapshot (``hearth_automations.service.service_state``, named
``automations-{instance}-of-{instances}``: another share of the homes folds other homes) holds the whole
state and the positions of both feeds, taken at one instant: the journal feed saves it (every minute or
500,000 journal records, and at a clean stop), right after a poll's effects were settled, with the home
journal feed's ``positions()`` read in the same synchronous step. Why one and not one per feed: the engine
applies its own run facts to the view as it decides, so view and engine are one state; two snapshots
taken apart would each need the other's moment. At start the journal feed restores it and seeks; its
records wait until the home-journal feed, started at the saved positions, has read to its end.

**The two feeds in order.** The journal and the home journal are not ordered one against the other, so
each journal poll waits, before its records are evaluated, until the home-journal feed has read what
that topic held when the poll came back (``TopicFollower(after=...)``): a trigger fact written after an
automation was created (or switched, or its zone changed) is evaluated against it, however far apart
the two feeds' fetches were. It costs a ListOffsets request per journal poll.

Saved: the view (zones, webhooks, schedules, automations with their switches and suspensions, the
latest runs per automation, the notifications without an outcome), the scheduler's pending resumes, the
engine's reported states, quarantines, loop breakers, commands on their way, queues and pending
``for_s`` timers. Derived again: the trigger index, when to look at each schedule next, a time trigger's
last instant (from its latest run) and next wake.

Why the restored state plus the tails decide as a full replay, each trigger acting exactly once:

* the snapshot holds no decision that is not on the broker (``ServiceState.snapshot`` refuses while the
  engine's batch holds or sends one, or a write failed), and its journal positions J are where the feed
  was: every record before J was evaluated and its runs are written, none after J was;
* every run fact written after the snapshot's instant lies after the saved home-journal positions (that
  feed could not have read it yet), so the home journal's tail folds it back before any record after J
  is evaluated: such a trigger is skipped as in a full replay, which also folds the whole home journal
  first. A run fact folded twice (in the snapshot and again from the tail) changes nothing;
* a trigger killed between its commands and its run fact was in a poll whose flush never settled, so no
  snapshot was taken after its evaluation: its record lies after J, it is evaluated again, its run is in
  no journal, and it is decided again with the same run and command ids: the device actor records the
  command once, the run fact is written once;
* a ``for_s`` timer due after the snapshot is in it (pending) and fires at the first tick, unless its run
  is in the home journal's tail (skipped); a time trigger's instant has a derived run id, and the latest
  run of each automation is kept; a queued trigger is in the saved queue with its recorded run;
* the tail is decided on the engine's bookkeeping as it was at J, which is the live process's own (a
  full replay rebuilds it from the journal instead).

**Memory bounded by live state.** Runs per automation: ``REPLAY_RUNS_KEPT`` while the journals are read
(the skipping above needs the runs recorded after the snapshot, which the home journal's tail brings
back: a minute of them), then ``LIVE_RUNS_KEPT``, the latest (a time trigger's last instant; live, each
record, timer, instant and queued trigger is decided once by construction). An automation with more
than ``REPLAY_RUNS_KEPT`` runs in one tail has its oldest decided again, under the same ids (the actor
records the command once, the run fact folds once, a notification goes again under its dedupe id). No
delivery facts (the notifier sends only what the view's ``unsent`` holds). A command counts as on until
its end or its deadline's grace; the loop breaker remembers recent command ids only; one timer per
automation. The snapshot is as large as that state, not as the journals' history.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from hearth_automations.adapters.command_path import KafkaCommandPath
from hearth_automations.adapters.webhooks import WebhookSender
from hearth_automations.service.engine import Engine
from hearth_automations.service.notifier import Notifier
from hearth_automations.service.scheduler import Scheduler
from hearth_automations.service.service_state import ServiceState
from hearth_automations.settings import AutomationsSettings
from hearth_shared.adapters.collector import freeze_started_state
from hearth_shared.adapters.http_calls import GatedClient
from hearth_shared.adapters.kafka import KafkaWriter, partition_of
from hearth_shared.adapters.snapshots import SnapshotStore
from hearth_shared.adapters.topic_follower import TopicFollower, snapshot_policy
from hearth_shared.adapters.topics import PARTITIONS
from hearth_shared.domain.home_facts import decode_home_fact
from hearth_shared.domain.home_view import HomesView
from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.events import CommandRequested as CommandRequestedFact
from hearth_shared.schema.events import MalformedRecord, fact_type, utcnow, wire_name

log = logging.getLogger(__name__)

REPLAY_RUNS_KEPT = 500  # per automation, while the journals are read (the module docstring says why)
LIVE_RUNS_KEPT = 1  # per automation, once live

_REQUESTED = wire_name(CommandRequestedFact)


class AutomationsService:
    def __init__(
        self,
        settings: AutomationsSettings,
        writer: KafkaWriter,
        clock: Callable[[], datetime],
        snapshots: SnapshotStore | None,
    ):
        self.settings = settings
        self.writer = writer
        stack = settings.stack
        view = self.view = HomesView(runs_kept=REPLAY_RUNS_KEPT, deliveries_kept=0)
        self.scheduler = Scheduler(
            view,
            KafkaCommandPath(writer),
            owns=self.owns,
            clock=clock,
            expires_in_s=settings.command_expires_in_s,
            readings=self._reported,
            preheat_max_s=settings.preheat_max_s,
        )
        self.http = GatedClient(timeout=settings.webhook_timeout_s)  # (webhooks.py: why gated)
        sender = WebhookSender(
            self.http,
            attempts=settings.webhook_attempts,
            backoff_s=settings.webhook_backoff_s,
            max_backoff_s=settings.webhook_max_backoff_s,
        )
        path = KafkaCommandPath(writer)
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
        self.state = ServiceState(view, self.scheduler, self.engine, self.homes_feed.positions)
        self.snapshot_name = f"automations-{settings.instance}-of-{settings.instances}"
        self.journal_feed = TopicFollower(
            stack.kafka_bootstrap_servers, [stack.topics.journal], self._journal_record, "journal",
            after_poll=self.engine.settle, max_records=settings.poll_records,
            snapshots=snapshot_policy(stack, self.snapshot_name, self.state, store=snapshots),
            after=self.homes_feed,  # a trigger after the automation written a moment before it
        )  # fmt: skip
        self.heartbeat = Path(settings.heartbeat_file) if settings.heartbeat_file else None

    def _reported(self, device_id: str) -> dict[str, Any]:
        """A device's latest reported state, as the engine keeps it (the scheduler's preheat reads it)."""
        return self.engine.reported.get(device_id, {})

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
        await self.writer.start()
        await self.read_journals()
        self.view.keep_runs(LIVE_RUNS_KEPT)
        await self.scheduler.go_live()
        self.engine.live = True
        self.engine.undelivered()
        log.info("automations instance %d/%d live", self.settings.instance, self.settings.instances)

    async def read_journals(self) -> None:
        """Restore the snapshot, then read the home journal's tail to its end, then the journal's."""
        await self.journal_feed.start()  # restores and seeks; its records wait for the home journal
        await self.homes_feed.start(self.state.restored_homes_positions)
        await self.homes_feed.wait_caught_up()
        await self.journal_feed.wait_caught_up()

    async def stop(self) -> None:
        await self.notifier.stop()
        await self.http.aclose()
        await self.journal_feed.stop()
        await self.homes_feed.stop()
        await self.writer.stop()

    async def run(self) -> None:
        await self.start()
        # The process's state, as replayed, is long-lived: out of the collector's full passes, which
        # walked all of it (about 0.15 s a pass with 10,000 automations, a stall of every run in flight).
        freeze_started_state()
        try:
            while True:
                failure = self.journal_feed.failure() or self.scheduler.broken
                if failure is not None:
                    raise RuntimeError("a write failed: restart to replay from the snapshot") from failure
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
    writer: KafkaWriter | None = None,
    clock: Callable[[], datetime] = utcnow,
    snapshots: SnapshotStore | None = None,
) -> AutomationsService:
    settings = settings or AutomationsSettings()
    stack = settings.stack
    writer = writer or KafkaWriter(stack.kafka_bootstrap_servers, stack.topics, client_id="automations")
    return AutomationsService(settings, writer, clock, snapshots)
