"""The automation engine: device-journal facts in, runs out (commands through the command path,
notifications, and an ``automation.ran`` fact per run), for the homes this process owns.

At most once per trigger, crashes included: a run's id is derived from (automation, trigger fact), its
commands' ids from (run, action); the commands go to the inbox first, then the run fact. After a crash
the journal is read again from its start: a trigger whose run is in the home journal is skipped, one
whose run is not (killed between the two) runs again with the same command ids, which the device actor
records once. Facts older than the automation never trigger it. Notifications are sent after the run
fact, by ``Notifier``; one whose delivery fact is missing after a restart is sent again with the same
notification id (receivers dedupe on it).

Modes count a run as on while any of its commands has not reached a terminal status. The loop breaker
(``hearth_automations.rules.LoopBreaker``) runs on fact time, so a replay decides as the live run did.

Delayed triggers (``hearth_automations.triggers``): a state held ``for_s`` and a time trigger fire from
``tick`` (called by the app once both journals were read to their ends), with the same run ids on every
restart. A command action for a device the journal shows quarantined is not sent: the run records it
as ``skipped: "quarantined"`` with the quarantine's reason (the device actor would reject it anyway).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

import msgspec

from hearth_automations.defaults import TRIGGER_DEVICE, default_automations
from hearth_automations.rules import LoopBreaker, admit, conditions_hold, fact_triggers, state_triggers
from hearth_automations.run_notifications import notification_content, undelivered
from hearth_automations.triggers import Cause, DelayedTriggers
from hearth_shared.domain.automation import Automation, action_id, run_id
from hearth_shared.events import (
    COMMAND_STATUS_BY_EVENT,
    TERMINAL_STATUSES,
    DeviceQuarantined,
    DeviceRegistered,
    DeviceReleased,
    Event,
    StateReported,
    SubmitCommand,
)
from hearth_shared.home_facts import (
    ActionRecord,
    AutomationCreated,
    AutomationRan,
    AutomationSuspended,
    HomeFact,
    RunPayload,
    SuspendedPayload,
)
from hearth_shared.home_view import HomesView

log = logging.getLogger(__name__)


class EnginePath(Protocol):
    async def submit(self, request: SubmitCommand) -> None: ...

    async def append(self, fact: HomeFact) -> None: ...


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
        self.path = path
        self.notify = notify
        self.owns = owns
        self.clock = clock
        self.expires_in = timedelta(seconds=expires_in_s)
        self.reported: dict[str, dict[str, Any]] = {}
        self.breakers: dict[uuid.UUID, LoopBreaker] = {}
        self.running: dict[uuid.UUID, set[uuid.UUID]] = {}  # automation -> its commands not yet ended
        self.owner: dict[uuid.UUID, uuid.UUID] = {}  # command -> automation
        self.queued: dict[uuid.UUID, list[Cause]] = {}
        self.quarantined: dict[str, str] = {}  # device -> the quarantine's reason
        self.delayed = DelayedTriggers()

    async def on_fact(self, event: Event) -> None:
        if not self.owns(event.home_id):
            return
        before = self._observe(event)
        await self._track_commands(event)
        if isinstance(event, DeviceRegistered) and self.defaults:
            await self._create_defaults(event)
        for state in self.view.automations_of(event.home_id):
            automation = state.definition
            if not state.active:
                self.delayed.forget(automation.automation_id)  # switched back on, it waits for a new edge
            elif event.occurred_at > automation.created_at:
                await self._consider(automation, event, before)

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

    async def _consider(self, automation: Automation, event: Event, before: dict[str, Any]) -> None:
        trigger = automation.trigger
        reported = event.payload.reported if isinstance(event, StateReported) else None
        if trigger.state is not None and trigger.state.for_s is not None:
            if reported is not None:
                held = self.delayed.on_report(automation, event, before, reported)
                if held is not None:  # it had held for for_s before this report broke it
                    await self._trigger(automation, held)
            return
        hit = fact_triggers(trigger, event.type, event.device_id) or (
            reported is not None and state_triggers(trigger, event.device_id, before, reported)
        )
        if hit:
            await self._trigger(automation, Cause.of(event))

    async def tick(self) -> int:
        """Fire the ``for_s`` timers and time triggers due now; returns how many runs were decided."""
        now = self.clock()
        decided = 0
        for automation_id, cause in self.delayed.due_timers(now):
            state = self.view.automations.get(automation_id)
            if state is not None and state.active and self.owns(state.definition.home_id):
                decided += await self._trigger(state.definition, cause)
        for automation_id, state in list(self.view.automations.items()):
            automation = state.definition
            if automation.trigger.time is None or not self.owns(automation.home_id):
                continue
            timezone = self.view.timezone(automation.home_id)
            instant = self.delayed.due_instant(automation, timezone, self.view.runs.get(automation_id), now)
            if instant is not None and state.active:
                decided += await self._trigger(automation, instant)
        return decided

    async def _track_commands(self, event: Event) -> None:
        status = COMMAND_STATUS_BY_EVENT.get(type(event))
        if status not in TERMINAL_STATUSES or event.correlation_id is None:
            return
        automation_id = self.owner.pop(event.correlation_id, None)
        if automation_id is None:
            return
        running = self.running.get(automation_id, set())
        running.discard(event.correlation_id)
        queue = self.queued.get(automation_id)
        if not running and queue:
            state = self.view.automations.get(automation_id)
            if state is not None and state.active:
                await self._trigger(state.definition, queue.pop(0), dequeued=True)

    async def _trigger(self, automation: Automation, cause: Cause, *, dequeued: bool = False) -> bool:
        """Decide and record the run of ``cause`` (True), unless it was recorded already."""
        aid = automation.automation_id
        rid = run_id(aid, cause.fact_id)
        runs = self.view.runs.get(aid)
        known = runs.get(rid) if runs is not None else None
        if known is not None and (known.fired or not dequeued):
            return False  # this trigger was handled already (a replay, or a second process)
        breaker = self.breakers.setdefault(aid, LoopBreaker(automation.max_runs_per_minute))
        reason = breaker.check(cause.caused_by, cause.occurred_at)
        if reason is not None:
            await self._suspend(automation, cause, reason)
            return True
        conditions = conditions_hold(cause.on_its_device(automation.conditions), self.reported)
        admission = "start" if dequeued else admit(automation.mode, len(self.running.get(aid, ())))
        fired = all(conditions) and admission == "start"
        actions: list[ActionRecord] = []
        if fired:
            actions = await self._act(automation, rid, cause)
            sent = [a.action_id for a in actions if a.kind == "command" and a.skipped is None]
            breaker.ran(cause.occurred_at, sent)
        elif all(conditions) and admission == "queue":
            self.queued.setdefault(aid, []).append(cause)
        fact = AutomationRan(
            fact_id=rid,
            home_id=automation.home_id,
            occurred_at=self.clock(),
            recorded_at=self.clock(),
            causation_id=cause.fact_id,
            payload=RunPayload(
                automation_id=aid,
                run_id=rid,
                trigger=cause.record(),
                conditions=tuple(conditions),
                fired=fired,
                admission=admission,
                actions=tuple(actions),
            ),
        )
        await self.path.append(fact)
        self.view.apply(fact)
        for action in actions:
            if action.kind == "notify":
                self.enqueue_notification(automation, fact.payload, action)
        return True

    async def _act(self, automation: Automation, rid: uuid.UUID, cause: Cause) -> list[ActionRecord]:
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
                await self.path.submit(
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
        for automation in default_automations(event.home_id, since):
            if automation.automation_id in self.view.automations:
                continue
            fact = AutomationCreated(
                fact_id=automation.automation_id, home_id=event.home_id, occurred_at=event.occurred_at,
                recorded_at=self.clock(), causation_id=event.event_id, payload=automation,
            )  # fmt: skip
            await self.path.append(fact)
            self.view.apply(fact)

    def enqueue_notification(self, automation: Automation, run: RunPayload, action: ActionRecord) -> None:
        content = notification_content(automation, run, action)
        if content is not None:
            self.notify.enqueue(automation.home_id, action.action_id, content)

    def undelivered(self) -> None:
        """After a restart: the notifications of recorded runs that have no delivery fact, sent again."""
        for automation, run, action in undelivered(self.view, self.owns):
            self.enqueue_notification(automation, run, action)

    async def _suspend(self, automation: Automation, cause: Cause, reason: str) -> None:
        detail = {
            "own_action": f"{cause.type} of {cause.device_id} was caused by this automation's own command",
            "too_many_runs": f"more than {automation.max_runs_per_minute} runs in a minute",
        }[reason]
        fact = AutomationSuspended(
            fact_id=uuid.uuid5(automation.automation_id, f"suspended\n{cause.fact_id}"),
            home_id=automation.home_id,
            occurred_at=self.clock(),
            recorded_at=self.clock(),
            causation_id=cause.fact_id,
            payload=SuspendedPayload(
                automation_id=automation.automation_id,
                reason=reason,
                detail=detail,
                trigger_fact_id=cause.fact_id,
            ),
        )
        await self.path.append(fact)
        self.view.apply(fact)
        log.warning("automation %s suspended: %s", automation.automation_id, detail)
