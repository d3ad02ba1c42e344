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
from hearth_shared.domain.automation import Automation, action_id, run_id
from hearth_shared.events import (
    COMMAND_STATUS_BY_EVENT,
    TERMINAL_STATUSES,
    DeviceRegistered,
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
    TriggerRecord,
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
        self.queued: dict[uuid.UUID, list[Event]] = {}

    async def on_fact(self, event: Event) -> None:
        if not self.owns(event.home_id):
            return
        before: dict[str, Any] = {}
        if isinstance(event, StateReported):
            before = dict(self.reported.get(event.device_id, {}))
            self.reported.setdefault(event.device_id, {}).update(event.payload.reported)
        await self._track_commands(event)
        if isinstance(event, DeviceRegistered) and self.defaults:
            await self._create_defaults(event)
        for state in self.view.automations_of(event.home_id):
            automation = state.definition
            if not state.active:
                continue
            if event.occurred_at <= automation.created_at:
                continue
            trigger = automation.trigger
            hit = fact_triggers(trigger, event.type, event.device_id) or (
                isinstance(event, StateReported)
                and state_triggers(trigger, event.device_id, before, event.payload.reported)
            )
            if hit:
                await self._trigger(automation, event)

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

    async def _trigger(self, automation: Automation, event: Event, *, dequeued: bool = False) -> None:
        aid = automation.automation_id
        rid = run_id(aid, event.event_id)
        runs = self.view.runs.get(aid)
        known = runs.get(rid) if runs is not None else None
        if known is not None and (known.fired or not dequeued):
            return  # this trigger was handled already (a replay, or a second process)
        breaker = self.breakers.setdefault(aid, LoopBreaker(automation.max_runs_per_minute))
        caused_by = event.correlation_id or getattr(getattr(event, "payload", None), "command_id", None)
        reason = breaker.check(caused_by, event.occurred_at)
        if reason is not None:
            await self._suspend(automation, event, reason)
            return
        conditions = conditions_hold(automation.conditions, self.reported)
        admission = "start" if dequeued else admit(automation.mode, len(self.running.get(aid, ())))
        fired = all(conditions) and admission == "start"
        actions: list[ActionRecord] = []
        if fired:
            actions = await self._act(automation, rid, event)
            breaker.ran(event.occurred_at, [a.action_id for a in actions if a.kind == "command"])
        elif all(conditions) and admission == "queue":
            self.queued.setdefault(aid, []).append(event)
        fact = AutomationRan(
            fact_id=rid,
            home_id=automation.home_id,
            occurred_at=self.clock(),
            recorded_at=self.clock(),
            causation_id=event.event_id,
            payload=RunPayload(
                automation_id=aid,
                run_id=rid,
                trigger=TriggerRecord(
                    fact_id=event.event_id,
                    type=event.type,
                    device_id=event.device_id,
                    occurred_at=event.occurred_at,
                ),
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

    async def _act(self, automation: Automation, rid: uuid.UUID, event: Event) -> list[ActionRecord]:
        now = self.clock()
        records = []
        for i, action in enumerate(automation.actions):
            aid = action_id(rid, i)
            if action.command is not None:
                c = action.command
                if c.device_id == TRIGGER_DEVICE:
                    c = msgspec.structs.replace(c, device_id=event.device_id)
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
        notify = automation.actions[action.index].notify
        if notify is None:
            return
        content = {
            "notification_id": str(action.action_id),
            "home_id": automation.home_id,
            "automation_id": str(automation.automation_id),
            "automation": automation.name,
            "run_id": str(run.run_id),
            "message": notify.message,
            "trigger": {
                "type": run.trigger.type,
                "device_id": run.trigger.device_id,
                "fact_id": str(run.trigger.fact_id),
                "occurred_at": run.trigger.occurred_at.isoformat(),
            },
        }
        self.notify.enqueue(automation.home_id, action.action_id, content)

    def undelivered(self) -> None:
        """After a restart: the notifications of recorded runs that have no delivery fact, sent again."""
        for automation_id, runs in self.view.runs.items():
            state = self.view.automations.get(automation_id)
            if state is None or not self.owns(state.definition.home_id):
                continue
            delivered = set(self.view.deliveries.get(state.definition.home_id) or ())
            for run in runs.values():
                for action in run.actions:
                    if action.kind == "notify" and action.action_id not in delivered:
                        self.enqueue_notification(state.definition, run, action)

    async def _suspend(self, automation: Automation, event: Event, reason: str) -> None:
        detail = {
            "own_action": f"{event.type} of {event.device_id} was caused by this automation's own command",
            "too_many_runs": f"more than {automation.max_runs_per_minute} runs in a minute",
        }[reason]
        fact = AutomationSuspended(
            fact_id=uuid.uuid5(automation.automation_id, f"suspended\n{event.event_id}"),
            home_id=automation.home_id,
            occurred_at=self.clock(),
            recorded_at=self.clock(),
            causation_id=event.event_id,
            payload=SuspendedPayload(
                automation_id=automation.automation_id,
                reason=reason,
                detail=detail,
                trigger_fact_id=event.event_id,
            ),
        )
        await self.path.append(fact)
        self.view.apply(fact)
        log.warning("automation %s suspended: %s", automation.automation_id, detail)
