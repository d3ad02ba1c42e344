"""What triggers a run (``Cause``), and the triggers that fire later than their fact: the pending ``for_s``
timers and the time triggers' next instants (``DelayedTriggers``). No I/O and no clock of its own: the
engine passes the facts and the time; the rules are ``hearth_shared.domain.automation_timers``.

Everything here is derived from the journals, so a restart rebuilds it: the pending timers from the
device journal the engine replays (the edge fact and its time), the last instant a time trigger ran for
from its runs in the home journal. Firing twice is prevented where the run is decided (the engine): a run
id is derived from (automation, trigger fact) or (automation, instant), and a recorded run is not run
again.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import msgspec

from hearth_automations.service.defaults import TRIGGER_DEVICE
from hearth_shared.domain.automation import TIME_TRIGGER, Automation, StateTest, time_trigger_id
from hearth_shared.domain.automation_timers import time_due, time_next, timer_change, timer_due_at
from hearth_shared.domain.home_facts import RunPayload, TriggerRecord
from hearth_shared.domain.schedule import ScheduleInvalid, zone
from hearth_shared.schema.events import Event


class Cause(msgspec.Struct, frozen=True, kw_only=True):
    """A run's trigger: a journal fact, or a time trigger's instant (``fact_id`` derived from it)."""

    fact_id: uuid.UUID
    type: str
    device_id: str
    occurred_at: datetime
    caused_by: uuid.UUID | None = None  # the command whose facts these are (the loop breaker's clue)
    due_at: datetime | None = None

    @classmethod
    def of(cls, event: Event) -> Cause:
        payload_command = getattr(getattr(event, "payload", None), "command_id", None)
        return cls(
            fact_id=event.event_id,
            type=event.type,
            device_id=event.device_id,
            occurred_at=event.occurred_at,
            caused_by=event.correlation_id or payload_command,
        )

    @classmethod
    def at_instant(cls, automation_id: uuid.UUID, instant: datetime) -> Cause:
        return cls(
            fact_id=time_trigger_id(automation_id, instant),
            type=TIME_TRIGGER,
            device_id="",
            occurred_at=instant,
            due_at=instant,
        )

    def on_its_device(self, tests: tuple[StateTest, ...]) -> tuple[StateTest, ...]:
        """The conditions, those on ``TRIGGER_DEVICE`` testing this trigger's device."""
        mine = self.device_id
        return tuple(
            msgspec.structs.replace(t, device_id=mine) if t.device_id == TRIGGER_DEVICE else t for t in tests
        )

    def record(self) -> TriggerRecord:
        return TriggerRecord(
            fact_id=self.fact_id,
            type=self.type,
            device_id=self.device_id,
            occurred_at=self.occurred_at,
            due_at=self.due_at,
        )


class DelayedTriggers:
    """Per automation: its pending ``for_s`` timer (at most one: a new one starts only on an edge, after
    the test stopped holding), and for a time trigger the last instant it ran for and when to look again."""

    def __init__(self) -> None:
        self.pending: dict[uuid.UUID, Cause] = {}  # automation -> the edge fact, with due_at
        self.last_instant: dict[uuid.UUID, datetime] = {}
        self.wake: dict[uuid.UUID, tuple[str, datetime]] = {}  # automation -> (zone, next instant)

    def on_report(
        self, automation: Automation, event: Event, before: dict[str, Any], after: dict[str, Any]
    ) -> Cause | None:
        """Start or stop ``automation``'s timer for this report; a timer that was due before the report
        that stopped it is returned, to fire now (the test had held for ``for_s``)."""
        change = timer_change(automation.trigger, event.device_id, before, after)
        aid = automation.automation_id
        if change == "start" and aid not in self.pending and event.occurred_at > automation.created_at:
            due_at = timer_due_at(automation.trigger, event.occurred_at)
            self.pending[aid] = msgspec.structs.replace(Cause.of(event), due_at=due_at)
        elif change == "stop":
            stopped = self.pending.pop(aid, None)
            if stopped is not None and stopped.due_at is not None and stopped.due_at <= event.occurred_at:
                return stopped
        return None

    def due_timers(self, now: datetime) -> list[tuple[uuid.UUID, Cause]]:
        """The pending timers due at ``now``, taken out."""
        due = [(aid, c) for aid, c in self.pending.items() if c.due_at is not None and c.due_at <= now]
        for aid, _ in due:
            del self.pending[aid]
        return due

    def due_instant(
        self, automation: Automation, timezone: str, runs: dict[uuid.UUID, RunPayload] | None, now: datetime
    ) -> Cause | None:
        """The time trigger's instant due at ``now`` (once: later calls look after it), or None."""
        time = automation.trigger.time
        aid = automation.automation_id
        if time is None:
            return None
        woken = self.wake.get(aid)
        if woken is not None and woken[0] == timezone and now < woken[1]:
            return None
        try:
            tz = zone(timezone)
        except ScheduleInvalid:
            return None
        if aid not in self.last_instant:  # first look since the start: what the home journal says it ran
            ran = [r.trigger.occurred_at for r in (runs or {}).values() if r.trigger.type == TIME_TRIGGER]
            self.last_instant[aid] = max([automation.created_at, *ran])
        instant = time_due(time, tz, self.last_instant[aid], now)
        following = time_next(time, tz, now)
        self.wake[aid] = (timezone, following or now + timedelta(days=1))
        if instant is None:
            return None
        self.last_instant[aid] = instant
        return Cause.at_instant(aid, instant)

    def forget(self, automation_id: uuid.UUID) -> None:
        self.pending.pop(automation_id, None)
