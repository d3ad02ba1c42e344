"""The automations service's snapshot (``hearth_automations.service.service_state``) with fakes: one
process over a fake broker (the inbox and the home journal as lists) that reads the journals as the feeds
do, per record, and snapshots into ``MemorySnapshotStore``.

* restored from a snapshot and fed the tails, a process decides and holds exactly what the one that
  never stopped does (its commands, run facts, view, scheduler and engine state, byte for byte);
* killed between a poll's commands and its run facts, a restart from an earlier snapshot acts on
  nothing recorded after that snapshot, sends the killed poll's commands again with the very same ids,
  and every trigger ends up with one run fact;
* no snapshot while a decision is not on the broker; a resume being sent stays in the snapshot;
* nothing in the engine grows with history: commands that never end leave at their deadline's grace,
  the loop breaker forgets old command ids, the snapshot stays as large after two days as after one.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
import pytest

from hearth_automations.app import LIVE_RUNS_KEPT, REPLAY_RUNS_KEPT
from hearth_automations.service.effect_batch import FlushFailed
from hearth_automations.service.engine import Engine
from hearth_automations.service.scheduler import Scheduler
from hearth_automations.service.service_state import EffectsNotWritten, ServiceState
from hearth_shared.adapters.snapshots import MemorySnapshotStore
from hearth_shared.domain.automation import Automation, StateTest, Trigger, action_id, run_id
from hearth_shared.domain.home_facts import (
    ActionRecord,
    AutomationRan,
    AutomationSuspended,
    AutomationSwitched,
    FiredPayload,
    HoldPayload,
    HomeFact,
    HomeNotificationsSet,
    HomeTimezoneSet,
    NotificationDelivered,
    NotificationPayload,
    NotificationsPayload,
    ProgramPayload,
    RunPayload,
    ScheduleHoldStarted,
    ScheduleResumed,
    ScheduleSet,
    ScheduleTransitionFired,
    SuspendedPayload,
    SwitchPayload,
    TimezonePayload,
    TriggerRecord,
)
from hearth_shared.domain.home_view import DELIVERIES_KEPT, RUNS_KEPT, HomesView
from hearth_shared.domain.schedule import DAYS, ProgramEntry, ScheduledCommand
from hearth_shared.schema.events import Event, SubmitCommand
from tests.support.engine_facts import HOME, T0, automation, converged, created, report
from tests.support.fakes import FakeClock, FakeNotify

pytestmark = pytest.mark.unit

SNAPSHOT = "automations-0-of-1"
POLL = 5  # journal records per poll
HOUR = timedelta(hours=1)


class Broker:
    """The inbox and the home journal every process of a test writes to; ``fail_facts``: the next
    home-journal write fails (a process killed while its run facts were on their way)."""

    def __init__(self, home_journal: Sequence[HomeFact]) -> None:
        self.home_journal = list(home_journal)
        self.inbox: list[SubmitCommand] = []
        self.fail_facts = False

    async def send_requests(self, requests: Sequence[SubmitCommand]) -> None:
        await asyncio.sleep(0)
        self.inbox.extend(requests)

    async def append_all(self, facts: Sequence[HomeFact]) -> None:
        await asyncio.sleep(0)
        if self.fail_facts:
            raise ConnectionError("killed before the home journal had the facts")
        self.home_journal.extend(facts)

    async def send_request(self, request: SubmitCommand) -> None:
        await self.send_requests([request])

    async def append(self, fact: HomeFact) -> None:
        await self.append_all([fact])


class Process:
    """One automations process: the view, scheduler and engine of the app, and where its two feeds are
    (records handed over, counted one by one as ``TopicFollower`` counts them)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.clock = FakeClock(T0)
        self.view = HomesView(runs_kept=REPLAY_RUNS_KEPT, deliveries_kept=0)
        self.scheduler = Scheduler(self.view, broker, owns=lambda h: True, clock=self.clock, expires_in_s=60)
        self.notify = FakeNotify()
        self.engine = Engine(
            self.view, broker, self.notify, owns=lambda h: True, clock=self.clock, expires_in_s=60,
            defaults=False,
        )  # fmt: skip
        self.homes_read = 0
        self.journal_read = 0
        self.state = ServiceState(
            self.view, self.scheduler, self.engine, lambda: {"home-journal": {0: self.homes_read}}
        )

    async def read_homes(self) -> None:
        while self.homes_read < len(self.broker.home_journal):
            await self.scheduler.on_home_fact(self.broker.home_journal[self.homes_read])
            self.homes_read += 1

    async def poll(self, journal: list[Event]) -> None:
        """The journal feed's next poll (its records evaluated, then settled, then a tick), and the home
        journal feed reading back what it wrote."""
        for event in journal[self.journal_read : self.journal_read + POLL]:
            self.clock.now = event.occurred_at
            await self.engine.evaluate(event)
            self.journal_read += 1
        await self.engine.settle()
        await self.engine.tick()
        await self.read_homes()

    async def save(self, store: MemorySnapshotStore) -> None:
        positions = {"journal": {0: self.journal_read}}
        await store.save(SNAPSHOT, self.state.snapshot(), positions, self.journal_read)

    @classmethod
    async def restarted(cls, broker: Broker, store: MemorySnapshotStore) -> Process:
        """A process restored from the latest snapshot that has read the home journal's tail."""
        process = cls(broker)
        saved = await store.load(SNAPSHOT)
        assert saved is not None
        process.state.restore(saved.state)
        process.journal_read = saved.manifest.positions["journal"][0]
        process.homes_read = process.state.restored_homes_positions["home-journal"][0]
        await process.read_homes()
        return process

    def held(self) -> bytes:
        """Everything the process holds but its feeds' positions, as bytes."""
        encode = msgspec.json.encode
        return encode([self.view.state(), self.scheduler.state(), self.engine.state()])


def hot(device_id: str, for_s: float | None = None) -> Trigger:
    return Trigger(state=StateTest(device_id=device_id, key="ambient_c", above=25.0, for_s=for_s))


def automations() -> list[Automation]:
    return [
        automation(hot("t1"), device_id="t9", mode="parallel", notify=True),
        automation(hot("t1", for_s=12.0), device_id="t9", mode="parallel"),
        automation(hot("t2"), device_id="t8", mode="single"),
        automation(hot("t2"), device_id="t8", mode="queued"),
        msgspec.structs.replace(automation(hot("t1"), device_id="t7"), max_runs_per_minute=3),
    ]


def journal_of(found: list[Automation]) -> list[Event]:
    """Hot and calm readings of t1 and t2 every 4 s, and the end of some commands the runs send (ids
    derived from the trigger facts, so known in advance; one that was not sent is ignored)."""
    facts: list[Event] = []
    at = T0
    for n in range(90):
        at += timedelta(seconds=4)
        device = "t1" if n % 3 else "t2"
        reading = report(at, device, ambient_c=30 if n % 4 in (1, 2) else 20)
        facts.append(reading)
        if n % 5 == 1:
            for a in found:
                command_id = action_id(run_id(a.automation_id, reading.event_id), 0)
                facts.append(converged(command_id, "t8", at + timedelta(milliseconds=1 + n)))
    return sorted(facts, key=lambda f: f.occurred_at)


async def test_restored_and_fed_the_tails_it_decides_and_holds_what_the_one_never_stopped_does() -> None:
    found = automations()
    journal = journal_of(found)
    for polls_before in (1, 9, 20):
        never_stopped = Process(Broker([created(a) for a in found]))
        await never_stopped.read_homes()
        store = MemorySnapshotStore()
        for _ in range(polls_before):
            await never_stopped.poll(journal)
        await never_stopped.save(store)
        inbox_then, homes_then = len(never_stopped.broker.inbox), len(never_stopped.broker.home_journal)
        while never_stopped.journal_read < len(journal):
            await never_stopped.poll(journal)

        # Its own broker, as it was at the snapshot: what the restored one decides is all its own.
        restarted = await Process.restarted(Broker(never_stopped.broker.home_journal[:homes_then]), store)
        assert restarted.journal_read == polls_before * POLL
        while restarted.journal_read < len(journal):
            await restarted.poll(journal)
        assert restarted.broker.inbox == never_stopped.broker.inbox[inbox_then:]
        assert restarted.broker.home_journal == never_stopped.broker.home_journal
        assert restarted.held() == never_stopped.held()
    decided = [f.payload for f in never_stopped.broker.home_journal if isinstance(f, AutomationRan)]
    assert {r.admission for r in decided} == {"start", "drop", "queue"}  # the modes took part
    assert any(r.trigger.due_at for r in decided)  # and a for_s timer


async def test_killed_between_commands_and_run_facts_a_restart_from_the_snapshot_acts_once() -> None:
    found = automations()
    journal = journal_of(found)
    home = [created(a) for a in found]
    never_stopped = Process(Broker(home))
    await never_stopped.read_homes()
    while never_stopped.journal_read < len(journal):
        await never_stopped.poll(journal)

    broker, store = Broker(home), MemorySnapshotStore()
    first = Process(broker)
    await first.read_homes()
    for _ in range(4):
        await first.poll(journal)
    await first.save(store)
    sent_at_the_snapshot = len(broker.inbox)
    for _ in range(5):  # recorded after the snapshot: nothing of these may act again
        await first.poll(journal)
    recorded_after = {r.command_id for r in broker.inbox[sent_at_the_snapshot:]}
    sent_before_the_kill = len(broker.inbox)
    broker.fail_facts = True
    while not broker.inbox[sent_before_the_kill:]:  # polls until one sends commands: its facts fail
        with pytest.raises(FlushFailed):
            await first.poll(journal)
    killed = {r.command_id for r in broker.inbox[sent_before_the_kill:]}
    broker.fail_facts = False

    restarted = await Process.restarted(broker, store)
    sent_by_the_restart = len(broker.inbox)
    while restarted.journal_read < len(journal):
        await restarted.poll(journal)
    again = Counter(r.command_id for r in broker.inbox[sent_by_the_restart:])
    assert killed and killed <= set(again)  # the killed poll's commands, sent again with the same ids
    assert recorded_after and not recorded_after & set(again)
    assert set(again) == {r.command_id for r in never_stopped.broker.inbox[sent_before_the_kill:]}
    assert {r.command_id for r in broker.inbox} == {r.command_id for r in never_stopped.broker.inbox}
    # the run facts, as many as the process that never stopped wrote (a queued trigger's twice: queued,
    # then started), the killed poll's written by the restart
    assert run_facts(broker) == run_facts(never_stopped.broker)


def run_facts(broker: Broker) -> Counter[tuple[uuid.UUID, bool]]:
    return Counter(
        (f.payload.run_id, f.payload.fired) for f in broker.home_journal if isinstance(f, AutomationRan)
    )


async def test_no_snapshot_holds_a_decision_that_is_not_on_the_broker() -> None:
    found = automations()
    journal = journal_of(found)
    process = Process(Broker([created(a) for a in found]))
    await process.read_homes()
    for event in journal[:12]:
        await process.engine.evaluate(event)
    assert len(process.engine.batch)  # decided, not sent
    with pytest.raises(EffectsNotWritten):
        process.state.snapshot()
    await process.engine.settle()
    assert process.state.snapshot()
    process.broker.fail_facts = True
    for event in journal[12:40]:
        await process.engine.evaluate(event)
    with pytest.raises(FlushFailed):
        await process.engine.settle()
    process.broker.fail_facts = False
    with pytest.raises(EffectsNotWritten):  # the state is ahead of the journals: never saved again
        process.state.snapshot()


class HeldPath(Broker):
    """A broker whose inbox answers only once ``answer`` is set: a command on its way."""

    def __init__(self) -> None:
        super().__init__([])
        self.answer = asyncio.Event()

    async def send_request(self, request: SubmitCommand) -> None:
        await self.answer.wait()
        await super().send_request(request)


async def test_a_resume_on_its_way_stays_in_the_snapshot_and_a_restart_sends_it_under_the_same_id() -> None:
    entry = ProgramEntry(days=DAYS, at="06:00", command=ScheduledCommand(name="set_target_temperature"))
    start = datetime(2026, 7, 1, 5, tzinfo=UTC)
    schedule = ScheduleSet(
        fact_id=uuid.uuid4(), home_id=HOME, device_id="t1", occurred_at=start, recorded_at=start,
        payload=ProgramPayload(program=(entry,), device_type="thermostat"),
    )  # fmt: skip
    resumed = ScheduleResumed(
        fact_id=uuid.uuid4(), home_id=HOME, device_id="t1", occurred_at=start + timedelta(days=1),
        recorded_at=start + timedelta(days=1),
    )  # fmt: skip
    held = HeldPath()
    first = Process(held)
    first.clock.now = start + timedelta(days=1, minutes=1)
    await first.scheduler.on_home_fact(schedule)
    await first.scheduler.go_live()
    sending = asyncio.ensure_future(first.scheduler.on_home_fact(resumed))
    await asyncio.sleep(0)
    assert not sending.done() and held.inbox == []  # the resume's command is on its way
    saved = first.state.snapshot()

    restarted = Process(Broker([]))
    restarted.clock.now = first.clock.now
    restarted.state.restore(saved)
    await restarted.scheduler.go_live()
    held.answer.set()
    await sending
    assert [r.command_id for r in restarted.broker.inbox] == [r.command_id for r in held.inbox]
    assert len(held.inbox) == 1 and not first.scheduler.pending_resumes


def view_history() -> list[HomeFact]:
    """A home journal of some length: a zone, a webhook, schedules with holds, transitions and resumes,
    automations switched and suspended, many more runs than are kept (with notifications, most of them
    with their outcome)."""
    found = automations()
    facts: list[HomeFact] = [created(a) for a in found]
    clock = [T0]

    def add(kind: type[HomeFact], payload: Any, device_id: str | None = None) -> None:
        clock[0] += timedelta(seconds=30)
        facts.append(
            kind(
                fact_id=uuid.uuid4(),
                home_id=HOME,
                device_id=device_id,
                occurred_at=clock[0],
                recorded_at=clock[0],
                payload=payload,
            )  # type: ignore[call-arg]
        )

    entry = ProgramEntry(days=DAYS, at="06:00", command=ScheduledCommand(name="set_target_temperature"))
    add(HomeTimezoneSet, TimezonePayload(timezone="Europe/Berlin"))
    add(HomeNotificationsSet, NotificationsPayload(webhook_url="http://127.0.0.1:9/hook", secret="s"))
    for n in range(120):
        a = found[n % len(found)]
        trigger = TriggerRecord(fact_id=uuid.uuid4(), type="state.reported", device_id="t1", occurred_at=T0)
        rid = run_id(a.automation_id, trigger.fact_id)
        notify = ActionRecord(index=1, kind="notify", action_id=action_id(rid, 1))
        add(
            AutomationRan,
            RunPayload(
                automation_id=a.automation_id,
                run_id=rid,
                trigger=trigger,
                conditions=(),
                fired=True,
                admission="start",
                actions=(notify,),
            ),
        )
        if n % 7:  # most notifications have their outcome
            add(
                NotificationDelivered,
                NotificationPayload(
                    notification_id=notify.action_id, automation_id=a.automation_id, attempts=1
                ),
            )
        if n % 30 == 3:
            device, instant = f"d{n}", clock[0]
            add(ScheduleSet, ProgramPayload(program=(entry,), device_type="thermostat"), device)
            add(ScheduleHoldStarted, HoldPayload(command_id=uuid.uuid4(), hold_until=instant + HOUR), device)
            add(
                ScheduleTransitionFired,
                FiredPayload(
                    command_id=uuid.uuid4(),
                    instant=instant,
                    local=instant.astimezone(ZoneInfo("Europe/Berlin")),
                    entry=0,
                    reason="transition",
                    command=entry.command,
                ),
                device,
            )
            add(ScheduleResumed, {}, device)
        if n % 40 == 5:
            add(AutomationSwitched, SwitchPayload(automation_id=a.automation_id, enabled=n % 80 == 5))
            add(
                AutomationSuspended,
                SuspendedPayload(
                    automation_id=a.automation_id,
                    reason="too_many_runs",
                    detail="",
                    trigger_fact_id=trigger.fact_id,
                ),
            )
    return facts


def test_the_home_view_restored_from_a_snapshot_and_fed_the_tail_equals_the_fold_of_everything() -> None:
    facts = view_history()
    whole = HomesView()
    for fact in facts:
        whole.apply(fact)
    store = MemorySnapshotStore()
    for cut in range(0, len(facts) + 1, 11):
        for folded_again in (0, 3):  # facts the snapshot holds, read again (the automations service's own)
            first = HomesView()
            for fact in facts[:cut]:
                first.apply(fact)
            asyncio.run(store.save("query-api-homes", first.snapshot(), {"home": {0: cut}}, cut))
            saved = asyncio.run(store.load("query-api-homes"))
            assert saved is not None
            restored = HomesView()
            restored.restore(saved.state)
            for fact in facts[max(0, cut - folded_again) :]:
                restored.apply(fact)
            assert msgspec.json.encode(restored.state()) == msgspec.json.encode(whole.state()), cut
    # bounded by live state: the latest runs of each automation, the latest deliveries of the home
    assert {len(runs) for runs in whole.runs.values()} == {RUNS_KEPT}
    assert len(whole.deliveries[HOME]) == DELIVERIES_KEPT
    ran = [f.payload for f in facts if isinstance(f, AutomationRan)]
    outcomes = {f.payload.notification_id for f in facts if isinstance(f, NotificationDelivered)}
    assert set(whole.unsent) == {a.action_id for r in ran for a in r.actions} - outcomes


def test_the_query_apis_home_view_keeps_no_runs_deliveries_or_unsent_even_from_an_older_snapshot() -> None:
    """The query API reads runs and outcomes from PostgreSQL: its view keeps live state only, whether it
    folds the home journal or restores a snapshot an older release saved with its runs in it."""
    facts = view_history()
    older = HomesView()  # what the previous release kept
    for fact in facts:
        older.apply(fact)
    assert older.runs and older.deliveries and older.unsent
    folded = HomesView(runs_kept=0, deliveries_kept=0, tracks_unsent=False)
    for fact in facts:
        folded.apply(fact)
    restored = HomesView(runs_kept=0, deliveries_kept=0, tracks_unsent=False)
    restored.restore(older.snapshot())
    for view in (folded, restored):
        assert (view.runs, view.deliveries, view.unsent) == ({}, {}, {})
        assert view.automations == older.automations and view.schedules == older.schedules
    assert msgspec.json.encode(restored.state()) == msgspec.json.encode(folded.state())


def test_an_unreadable_or_unknown_snapshot_leaves_the_view_untouched() -> None:
    view = HomesView()
    for fact in view_history()[:40]:
        view.apply(fact)
    before = msgspec.json.encode(view.state())
    for data in (b"{not json", msgspec.json.encode({"format": 99, "view": {}})):
        with pytest.raises((msgspec.DecodeError, ValueError)):
            view.restore(data)
        assert msgspec.json.encode(view.state()) == before


async def test_notifications_without_an_outcome_are_sent_again_after_a_restart_whatever_the_runs_kept() -> (
    None
):
    found = automations()
    journal = journal_of(found)
    first = Process(Broker([created(a) for a in found]))
    await first.read_homes()
    while first.journal_read < len(journal) // 2:
        await first.poll(journal)
    assert first.notify.sent  # the notify automation ran (the fake notifier records no outcome)
    first.view.keep_runs(LIVE_RUNS_KEPT)  # live: the latest run of each automation only
    store = MemorySnapshotStore()
    await first.save(store)
    restarted = await Process.restarted(first.broker, store)
    restarted.engine.undelivered()
    assert sorted(restarted.notify.sent) == sorted(first.notify.sent)


async def test_nothing_in_the_engine_grows_with_history() -> None:
    """Two days of a single-mode automation every 10 minutes whose command goes to a device the actor
    does not know (no fact of it ever comes back): each trigger still acts, the commands leave at their
    deadline's grace, the loop breaker forgets old command ids, and the snapshot does not grow."""
    lost = automation(hot("t1"), device_id="nobody", mode="single")
    process = Process(Broker([created(lost)]))
    await process.read_homes()
    sizes = []
    at = T0
    for n in range(2 * 24 * 6):
        for value in (20, 30):  # an edge every 10 minutes
            at += timedelta(minutes=5)
            process.clock.now = at
            await process.engine.tick()  # ticks run live between facts
            await process.engine.on_fact(report(at, "t1", ambient_c=value))
        await process.read_homes()
        if n in (6 * 24 - 1, 2 * 24 * 6 - 1):
            process.view.keep_runs(LIVE_RUNS_KEPT)
            sizes.append(len(process.state.snapshot()))
    fired = [f for f in process.broker.home_journal if isinstance(f, AutomationRan) and f.payload.fired]
    assert len(fired) == 2 * 24 * 6  # every edge acted: no command of a lost run blocks it for ever
    assert len(process.engine.owner) == len(process.engine.deadlines) == 1  # the latest only
    assert len(process.engine.breakers[lost.automation_id].sent) <= 8  # the last hour and a minute
    assert sizes[1] <= sizes[0] * 1.05, sizes  # one day or two: the same state
