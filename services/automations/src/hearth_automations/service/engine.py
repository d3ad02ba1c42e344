"""The automation engine: device-journal facts in, runs out (commands through the command path,
notifications, and an ``automation.ran`` fact per run), for the homes this process owns.

At most once per trigger, crashes included: a run's id is derived from (automation, trigger fact), its
commands' ids from (run, action); the commands go to the inbox first, then the run fact. After a crash
the journal is read again from the last snapshot's positions (``hearth_automations.app`` says why that
is enough), after the home journal: a trigger whose run is in the home journal is not decided again but
adopted (``_adopt``: its commands count as on, it counts for the loop breaker, a queued one joins the
queue, as its decider had it), one whose run is not (killed between the two) runs again with the same
command ids, which the device actor records once. Facts older than the automation never trigger it.
Notifications are sent after the run fact, by ``Notifier``; one whose delivery fact is missing after a
restart is sent again with the same notification id (receivers dedupe on it).

Sends are batched (``hearth_automations.service.effect_batch``): ``evaluate`` decides on a fact at once (the
view, modes, queues and loop breaker see the facts in the same order as one at a time) and collects its
effects; ``flush`` sends a group's commands, waits for their acks, then appends its facts. The feed
evaluates a poll of records, then flushes; ``on_fact`` is both for one fact. A new automation's
creation fact is flushed at once, with everything before it, so no command of its runs can be on the
inbox while the automation is not in the home journal.

Modes count a run as on while any of its commands has not reached a terminal status. The loop breaker
(``hearth_automations.service.rules.LoopBreaker``) runs on fact time, so a replay decides as the live
run did.

Delayed triggers (``hearth_automations.service.triggers``): a state held ``for_s`` and a time trigger
fire from ``tick`` (called by the app once both journals were read to their ends), with the same run ids
on every restart. A command action for a device the journal shows quarantined is not sent: the run
records it as ``skipped: "quarantined"`` with the quarantine's reason (the device actor would reject it
anyway).

Bounded by live state: a command counts as on until its terminal fact, or until ``COMMAND_GRACE``
past its deadline (the device actor records no fact at all for a command to a device it does not know,
and a replay may send again a command whose end it read before): so neither the commands on their way
nor a ``single`` automation's wait can outlive it. The loop breaker keeps recent command ids only
(``rules``). ``state``/``load_state``: everything above as one ``EngineState`` for the service's
snapshot (``hearth_automations.service.service_state``); the trigger index and the time triggers' next
instants are derived again, not saved.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

import msgspec

from hearth_automations.service.defaults import TRIGGER_DEVICE, default_automations
from hearth_automations.service.effect_batch import EffectBatch, EnginePath
from hearth_automations.service.rules import (
    LoopBreaker,
    admit,
    conditions_hold,
    fact_names,
    fact_triggers,
    state_triggers,
)
from hearth_automations.service.run_facts import ran_fact, suspended_fact
from hearth_automations.service.run_notifications import notification_content, undelivered
from hearth_automations.service.trigger_index import TriggerIndex
from hearth_automations.service.triggers import Cause, DelayedTriggers
from hearth_shared.domain.automation import Automation, FactNames, action_id, run_id
from hearth_shared.domain.home_facts import ActionRecord, AutomationCreated, RunPayload
from hearth_shared.domain.home_view import HomesView
from hearth_shared.schema.events import (
    COMMAND_STATUS_BY_EVENT,
    TERMINAL_STATUSES,
    DeviceQuarantined,
    DeviceRegistered,
    DeviceReleased,
    Event,
    StateReported,
    SubmitCommand,
)

log = logging.getLogger(__name__)

COMMAND_GRACE = timedelta(seconds=60)  # past a command's deadline, its end is taken as read
LOOP_MEMORY_SLACK = timedelta(hours=1)  # how long after its deadline a command id stays in the breaker


class CommandOnItsWay(msgspec.Struct, frozen=True, kw_only=True):
    automation_id: uuid.UUID
    deadline: datetime


class BreakerState(msgspec.Struct, kw_only=True):
    max_runs: int
    sent: dict[uuid.UUID, datetime] = {}
    runs: list[datetime] = []


class EngineState(msgspec.Struct, kw_only=True):
    """The engine's bookkeeping as a snapshot holds it (the view is saved beside it)."""

    reported: dict[str, dict[str, Any]] = {}
    quarantined: dict[str, str] = {}
    breakers: dict[uuid.UUID, BreakerState] = {}
    commands: dict[uuid.UUID, CommandOnItsWay] = {}  # not ended yet, in the order sent
    queued: dict[uuid.UUID, list[Cause]] = {}
    timers: dict[uuid.UUID, Cause] = {}  # the pending for_s timers, each with its due_at


class Notify(Protocol):
    def enqueue(self, home_id: str, notification_id: uuid.UUID, content: dict[str, Any]) -> None: ...


class Engine:
    def __init__(
        self,
        view: HomesView,
        path: EnginePath,
        notify: Notify,
        *,
        owns: Callable[[str], bool],
        clock: Callable[[], datetime],
        expires_in_s: float,
        defaults: bool = True,
    ) -> None:
        self.defaults = defaults
        self.live = False  # the app sets it once the journals were read to their ends
        self.view = view
        self.batch = EffectBatch(path)
        self.notify = notify
        self.owns = owns
        self.clock = clock
        self.expires_in = timedelta(seconds=expires_in_s)
        self.reported: dict[str, dict[str, Any]] = {}
        self.breakers: dict[uuid.UUID, LoopBreaker] = {}
        self.running: dict[uuid.UUID, set[uuid.UUID]] = {}  # automation -> its commands not yet ended
        self.owner: dict[uuid.UUID, uuid.UUID] = {}  # command -> automation
        self.deadlines: dict[uuid.UUID, datetime] = {}  # command -> its deadline, in the order sent
        # While replaying: commands that ended before the run that sent them was read (their device's
        # partition read ahead of the trigger's), by the end's fact time, so that run does not adopt them.
        self.ended_first: dict[uuid.UUID, datetime] = {}
        self.queued: dict[uuid.UUID, list[Cause]] = {}
        self.quarantined: dict[str, str] = {}  # device -> the quarantine's reason
        self.delayed = DelayedTriggers()
        self.triggers = TriggerIndex(view)

    async def on_fact(self, event: Event) -> None:
        """Evaluate one fact and send its effects (a caller without a group of facts)."""
        await self.evaluate(event)
        await self.flush()

    async def flush(self) -> None:
        """Send the effects collected since the last flush; raises ``FlushFailed`` (then nothing more is
        ever sent: see ``effect_batch``)."""
        await self.batch.flush()

    async def settle(self) -> None:
        """Flush until nothing collected is left: a tick may decide while a flush waits for its acks.
        Returns with every decision on the broker (``unsettled`` None), unless a flush failed (raised)."""
        await self.batch.flush()
        while len(self.batch):
            await self.batch.flush()

    def unsettled(self) -> str | None:
        """Why the state holds a decision that is not on the broker yet, or None."""
        return self.batch.unsettled()

    async def evaluate(self, event: Event) -> None:
        """Decide on ``event`` now; its commands and facts wait for ``flush``."""
        if not self.owns(event.home_id):
            return
        before = self._observe(event)
        self._track_commands(event)
        if isinstance(event, DeviceRegistered) and self.defaults:
            await self._create_defaults(event)
        home = self.triggers.of(event.home_id)
        for state in home.timed:
            if not state.active:
                self.delayed.forget(state.definition.automation_id)  # switched on, it waits for a new edge
        names = fact_names(event)
        for state in home.candidates(event.device_id, names):
            automation = state.definition
            if state.active and event.occurred_at > automation.created_at:
                self._consider(automation, event, names, before)

    def _observe(self, event: Event) -> dict[str, Any]:
        """Keep the devices' reported state and quarantines; the device's state before this fact."""
        before: dict[str, Any] = {}
        if isinstance(event, StateReported):
            before = dict(self.reported.get(event.device_id, {}))
            self.reported.setdefault(event.device_id, {}).update(event.payload.reported)
        elif isinstance(event, DeviceQuarantined):
            self.quarantined[event.device_id] = event.payload.reason
        elif isinstance(event, DeviceReleased):
            self.quarantined.pop(event.device_id, None)
        return before

    def _consider(
        self, automation: Automation, event: Event, names: FactNames, before: dict[str, Any]
    ) -> None:
        trigger = automation.trigger
        reported = event.payload.reported if isinstance(event, StateReported) else None
        if trigger.state is not None and trigger.state.for_s is not None:
            if reported is not None:
                held = self.delayed.on_report(automation, event, before, reported)
                if held is not None:  # it had held for for_s before this report broke it
                    self._trigger(automation, held)
            return
        hit = fact_triggers(trigger, names, event.device_id) or (
            reported is not None and state_triggers(trigger, event.device_id, before, reported)
        )
        if hit:
            self._trigger(automation, Cause.of(event))

    async def tick(self) -> int:
        """Fire the ``for_s`` timers and time triggers due now; returns how many runs were decided."""
        now = self.clock()
        decided = self._end_overdue(now)
        for automation_id, cause in self.delayed.due_timers(now):
            state = self.view.automations.get(automation_id)
            if state is not None and state.active and self.owns(state.definition.home_id):
                decided += self._trigger(state.definition, cause)
        for automation_id, state in list(self.view.automations.items()):
            automation = state.definition
            if automation.trigger.time is None or not self.owns(automation.home_id):
                continue
            timezone = self.view.timezone(automation.home_id)
            instant = self.delayed.due_instant(automation, timezone, self.view.runs.get(automation_id), now)
            if instant is not None and state.active:
                decided += self._trigger(automation, instant)
        self.ended_first.clear()  # ticks run live: the replay's timers and instants were looked at
        await self.flush()
        return decided

    def _track_commands(self, event: Event) -> None:
        status = COMMAND_STATUS_BY_EVENT.get(type(event))
        if status in TERMINAL_STATUSES and event.correlation_id is not None:
            self._command_ended(event.correlation_id, event.occurred_at)

    def _end_overdue(self, now: datetime) -> int:
        """The commands ``COMMAND_GRACE`` past their deadline with no terminal fact, ended; returns how
        many runs that dequeued."""
        decided = 0
        while self.deadlines:
            command_id = next(iter(self.deadlines))
            if self.deadlines[command_id] + COMMAND_GRACE > now:
                break
            decided += self._command_ended(command_id, now)
        return decided

    def _command_ended(self, command_id: uuid.UUID, at: datetime) -> bool:
        """A command of a run ended: once its automation has none on, its queue's next trigger runs."""
        self.deadlines.pop(command_id, None)
        automation_id = self.owner.pop(command_id, None)
        if automation_id is None:
            if not self.live:
                self._ended_first(command_id, at)
            return False
        running = self.running.get(automation_id, set())
        running.discard(command_id)
        if not running:
            self.running.pop(automation_id, None)
        queue = self.queued.get(automation_id)
        state = self.view.automations.get(automation_id)
        if running or not queue or state is None or not state.active:
            return False
        cause = queue.pop(0)
        if not queue:
            del self.queued[automation_id]
        return self._trigger(state.definition, cause, dequeued=True)

    def _trigger(self, automation: Automation, cause: Cause, *, dequeued: bool = False) -> bool:
        """Decide the run of ``cause`` and collect it whole (True), unless it was recorded already."""
        aid = automation.automation_id
        rid = run_id(aid, cause.fact_id)
        runs = self.view.runs.get(aid)
        known = runs.get(rid) if runs is not None else None
        if known is not None and (known.fired or not dequeued):
            self._adopt(automation, known, cause)  # handled already (a replay, or a second process)
            return False
        breaker = self._breaker_of(automation)
        reason = breaker.check(cause.caused_by, cause.occurred_at)
        if reason is not None:
            self._suspend(automation, cause, reason)
            return True
        conditions = conditions_hold(cause.on_its_device(automation.conditions), self.reported)
        admission = "start" if dequeued else admit(automation.mode, len(self.running.get(aid, ())))
        fired = all(conditions) and admission == "start"
        actions: list[ActionRecord] = []
        if fired:
            actions = self._act(automation, rid, cause)
            sent = [a.action_id for a in actions if a.kind == "command" and a.skipped is None]
            breaker.ran(cause.occurred_at, sent)
        elif all(conditions) and admission == "queue":
            self.queued.setdefault(aid, []).append(cause)
        fact = ran_fact(
            automation,
            rid,
            cause.record(),
            conditions=conditions,
            admission=admission,
            actions=actions,
            now=self.clock(),
        )
        self.view.apply(fact)
        self.batch.fact(fact, then=functools.partial(self._notifications, automation, fact.payload))
        return True

    def _adopt(self, automation: Automation, run: RunPayload, cause: Cause) -> None:
        """A run recorded already is not decided again, but taken over as its decider took it: its
        commands count as on (until their end, or their deadline's grace from now), it counts for the
        loop breaker, a queued trigger joins the queue; so the triggers after it are decided as the
        process that decided it would have."""
        aid = automation.automation_id
        if run.fired:
            sent = [a.action_id for a in run.actions if a.kind == "command" and a.skipped is None]
            deadline = self.clock() + self.expires_in
            for command_id in sent:
                if self.ended_first.pop(command_id, None) is not None:
                    continue
                self.running.setdefault(aid, set()).add(command_id)
                self.owner[command_id] = aid
                self.deadlines.setdefault(command_id, deadline)
            self._breaker_of(automation).ran(cause.occurred_at, sent)
        elif all(run.conditions) and run.admission == "queue" and cause not in self.queued.get(aid, ()):
            self.queued.setdefault(aid, []).append(cause)

    def _ended_first(self, command_id: uuid.UUID, at: datetime) -> None:
        """Remember an end read before its run, for as long as its run can still be read after it."""
        self.ended_first[command_id] = at
        horizon = at - self.expires_in - COMMAND_GRACE
        while self.ended_first:
            oldest = next(iter(self.ended_first))
            if self.ended_first[oldest] > horizon:
                return
            del self.ended_first[oldest]

    def _breaker_of(self, automation: Automation) -> LoopBreaker:
        breaker = self.breakers.get(automation.automation_id)
        if breaker is None:
            breaker = self.breakers[automation.automation_id] = self._breaker(automation.max_runs_per_minute)
        return breaker

    def _notifications(self, automation: Automation, run: RunPayload) -> None:
        for action in run.actions:
            if action.kind == "notify":
                self.enqueue_notification(automation, run, action)

    def _act(self, automation: Automation, rid: uuid.UUID, cause: Cause) -> list[ActionRecord]:
        now = self.clock()
        records = []
        for i, action in enumerate(automation.actions):
            aid = action_id(rid, i)
            if action.command is not None:
                c = action.command
                if c.device_id == TRIGGER_DEVICE:
                    c = msgspec.structs.replace(c, device_id=cause.device_id)
                quarantine = self.quarantined.get(c.device_id)
                if quarantine is not None:
                    records.append(
                        ActionRecord(index=i, kind="command", action_id=aid, device_id=c.device_id,
                                     name=c.name, skipped="quarantined", detail=quarantine)
                    )  # fmt: skip
                    log.info("automation %s: %s is quarantined, %s not sent", rid, c.device_id, c.name)
                    continue
                self.running.setdefault(automation.automation_id, set()).add(aid)
                self.owner[aid] = automation.automation_id
                self.deadlines[aid] = now + self.expires_in
                self.batch.command(
                    SubmitCommand(
                        request_id=aid,
                        device_id=c.device_id,
                        sent_at=now,
                        home_id=automation.home_id,
                        command_id=aid,
                        name=c.name,
                        params=dict(c.params),
                        expires_at=now + self.expires_in,
                    )
                )
                records.append(
                    ActionRecord(index=i, kind="command", action_id=aid, device_id=c.device_id, name=c.name)
                )
            elif action.notify is not None:
                records.append(ActionRecord(index=i, kind="notify", action_id=aid))
        return records

    async def _create_defaults(self, event: Event) -> None:
        """The home's corrective automations, once (ids derived from the home; see ``defaults``)."""
        # While replaying, from now on: a first start over an old journal must not act on its past.
        since = event.occurred_at if self.live else self.clock()
        created = False
        for automation in default_automations(event.home_id, since):
            if automation.automation_id in self.view.automations:
                continue
            fact = AutomationCreated(
                fact_id=automation.automation_id, home_id=event.home_id, occurred_at=event.occurred_at,
                recorded_at=self.clock(), causation_id=event.event_id, payload=automation,
            )  # fmt: skip
            self.batch.fact(fact)
            self.view.apply(fact)
            created = True
        if created:  # at once (rare: once per home), so that its runs' commands come after it
            await self.flush()

    def enqueue_notification(self, automation: Automation, run: RunPayload, action: ActionRecord) -> None:
        content = notification_content(automation, run, action)
        if content is not None:
            self.notify.enqueue(automation.home_id, action.action_id, content)

    def undelivered(self) -> None:
        """After a restart: the notifications of recorded runs that have no delivery fact, sent again."""
        for automation, run, action in undelivered(self.view, self.owns):
            self.enqueue_notification(automation, run, action)

    def _suspend(self, automation: Automation, cause: Cause, reason: str) -> None:
        fact = suspended_fact(automation, cause.record(), reason, self.clock())
        self.batch.fact(fact)
        self.view.apply(fact)
        log.warning("automation %s suspended: %s", automation.automation_id, fact.payload.detail)

    def _breaker(self, max_runs: int) -> LoopBreaker:
        return LoopBreaker(max_runs, remember=self.expires_in + LOOP_MEMORY_SLACK)

    # ------------------------------------------------------------------------------------ snapshots

    def state(self) -> EngineState:
        return EngineState(
            reported=self.reported,
            quarantined=self.quarantined,
            breakers={
                aid: BreakerState(max_runs=b.max_runs, sent=b.sent, runs=list(b.runs))
                for aid, b in self.breakers.items()
            },
            commands={
                command_id: CommandOnItsWay(automation_id=self.owner[command_id], deadline=deadline)
                for command_id, deadline in self.deadlines.items()
                if command_id in self.owner
            },
            queued=self.queued,
            timers=self.delayed.pending,
        )

    def load_state(self, state: EngineState) -> None:
        """Replace the bookkeeping with ``state`` (the view is loaded beside it, by the caller)."""
        breakers = {}
        for aid, saved in state.breakers.items():
            breaker = breakers[aid] = self._breaker(saved.max_runs)
            breaker.sent.update(saved.sent)
            breaker.runs.extend(saved.runs)
        running: dict[uuid.UUID, set[uuid.UUID]] = {}
        for command_id, command in state.commands.items():
            running.setdefault(command.automation_id, set()).add(command_id)
        self.reported = {device: dict(values) for device, values in state.reported.items()}
        self.quarantined = dict(state.quarantined)
        self.breakers = breakers
        self.running = running
        self.owner = {command_id: c.automation_id for command_id, c in state.commands.items()}
        self.deadlines = {command_id: c.deadline for command_id, c in state.commands.items()}
        self.queued = {aid: list(causes) for aid, causes in state.queued.items()}
        self.delayed = DelayedTriggers()
        self.delayed.pending = dict(state.timers)
        self.triggers = TriggerIndex(self.view)  # the view's automation states were replaced
