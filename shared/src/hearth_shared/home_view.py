"""Homes folded from home-journal facts: each home's zone, notification settings, and each scheduled
device's ``DeviceSchedule``. Pure and in memory; the query API (GET schedule) and the scheduler fold the
same facts with this one class, so what the API shows is what the scheduler decides from.

Folding a fact twice changes nothing (a fired transition only moves ``last_fired`` forward, a hold
names its command), so a replay, or two schedulers writing the same fact, is harmless.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from datetime import datetime

import msgspec

from hearth_shared.domain.automation import Automation
from hearth_shared.domain.schedule_hold import REMEMBERED, DeviceSchedule
from hearth_shared.home_facts import (
    AutomationCreated,
    AutomationRan,
    AutomationSuspended,
    AutomationSwitched,
    HomeFact,
    HomeNotificationsSet,
    HomeTimezoneSet,
    NotificationDelivered,
    NotificationGaveUp,
    NotificationsPayload,
    RunPayload,
    ScheduleHoldStarted,
    ScheduleResumed,
    ScheduleSet,
    ScheduleTransitionFired,
)

DEFAULT_TIMEZONE = "UTC"
RUNS_KEPT = 500  # per automation, in memory (the journal keeps them all)
DELIVERIES_KEPT = 500  # per home


class AutomationState(msgspec.Struct, kw_only=True):
    definition: Automation
    enabled: bool = True
    suspended: str | None = None  # the loop breaker's reason

    @property
    def active(self) -> bool:
        return self.enabled and self.suspended is None


class HomesView:
    def __init__(self) -> None:
        self.timezones: dict[str, str] = {}
        self.notifications: dict[str, NotificationsPayload] = {}
        self.schedules: dict[str, DeviceSchedule] = {}
        self.resumes: dict[str, datetime] = {}  # device -> when it was last resumed
        self.automations: dict[uuid.UUID, AutomationState] = {}
        self._by_home: dict[str, dict[uuid.UUID, AutomationState]] = {}  # the same states, by home
        self.runs: dict[uuid.UUID, OrderedDict[uuid.UUID, RunPayload]] = {}
        self.deliveries: dict[str, OrderedDict[uuid.UUID, HomeFact]] = {}

    def automations_of(self, home_id: str) -> list[AutomationState]:
        """The home's automations, in the order they were created (an index: the engine looks them up
        for every fact, and a scan of every home's was most of its time with 10,000 automations)."""
        return list(self._by_home.get(home_id, {}).values())

    def automation_count(self, home_id: str) -> int:
        """How many automations the home has (they are never removed: it changes only when one is made)."""
        return len(self._by_home.get(home_id, ()))

    def timezone(self, home_id: str) -> str:
        return self.timezones.get(home_id, DEFAULT_TIMEZONE)

    def apply(self, fact: HomeFact) -> DeviceSchedule | None:
        """Fold one fact; returns the device schedule it changed, if any."""
        if isinstance(fact, HomeTimezoneSet):
            self.timezones[fact.home_id] = fact.payload.timezone
            for device_id, known in self.schedules.items():
                if known.home_id == fact.home_id:
                    self.schedules[device_id] = msgspec.structs.replace(known, timezone=fact.payload.timezone)
            return None
        if isinstance(fact, HomeNotificationsSet):
            self.notifications[fact.home_id] = fact.payload
            return None
        if isinstance(fact, AutomationCreated | AutomationSwitched | AutomationSuspended | AutomationRan):
            self._apply_automation(fact)
            return None
        if isinstance(fact, NotificationDelivered | NotificationGaveUp):
            kept = self.deliveries.setdefault(fact.home_id, OrderedDict())
            kept[fact.payload.notification_id] = fact
            while len(kept) > DELIVERIES_KEPT:
                kept.popitem(last=False)
            return None
        return self._apply_schedule(fact)

    def _apply_schedule(self, fact: HomeFact) -> DeviceSchedule | None:
        if fact.device_id is None:
            return None
        state = self.schedules.get(fact.device_id)
        if isinstance(fact, ScheduleSet):
            state = DeviceSchedule(
                device_id=fact.device_id,
                home_id=fact.home_id,
                program=fact.payload.program,
                timezone=self.timezone(fact.home_id),
                set_at=fact.occurred_at,
                last_fired=state.last_fired if state else None,
                fired=state.fired if state else (),
            )
        elif state is None:
            return None
        elif isinstance(fact, ScheduleTransitionFired):
            p = fact.payload
            last = p.instant if state.last_fired is None else max(p.instant, state.last_fired)
            ends_hold = p.reason == "resume" or (
                state.hold_until is not None and p.instant >= state.hold_until
            )
            fired = state.fired if str(p.command_id) in state.fired else (*state.fired, str(p.command_id))
            state = msgspec.structs.replace(
                state,
                last_fired=last,
                hold_until=None if ends_hold else state.hold_until,
                held_by=None if ends_hold else state.held_by,
                fired=fired[-REMEMBERED:],
            )
        elif isinstance(fact, ScheduleHoldStarted):
            state = msgspec.structs.replace(
                state, hold_until=fact.payload.hold_until, held_by=fact.payload.command_id
            )
        elif isinstance(fact, ScheduleResumed):
            self.resumes[fact.device_id] = fact.occurred_at
            state = msgspec.structs.replace(state, hold_until=None, held_by=None)
        else:
            return None
        self.schedules[fact.device_id] = state
        return state

    def _apply_automation(self, fact: HomeFact) -> None:
        if isinstance(fact, AutomationCreated):
            aid = fact.payload.automation_id
            created = self.automations.setdefault(aid, AutomationState(definition=fact.payload))
            self._by_home.setdefault(created.definition.home_id, {})[aid] = created
            return
        automation_id = fact.payload.automation_id  # type: ignore[attr-defined]
        state = self.automations.get(automation_id)
        if state is None or state.definition.home_id != fact.home_id:
            return  # unknown, or named from another home: changes nothing
        if isinstance(fact, AutomationSwitched):
            state.enabled = fact.payload.enabled
            if fact.payload.enabled:
                state.suspended = None
        elif isinstance(fact, AutomationSuspended):
            state.suspended = fact.payload.reason
        elif isinstance(fact, AutomationRan):
            runs = self.runs.setdefault(automation_id, OrderedDict())
            runs[fact.payload.run_id] = fact.payload
            while len(runs) > RUNS_KEPT:
                runs.popitem(last=False)
