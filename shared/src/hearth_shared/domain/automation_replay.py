"""The backtest: a home's facts replayed through its automations' triggers and conditions, acting on
nothing. Pure. Two readers feed it and must count alike, so everything they must agree on is here:

* the query API (``POST /v1/automations/{id}/backtest``: a short stretch, read from the journal in the
  request, ``hearth_read_models.query.backtest_views``);
* the Spark job for long stretches (``hearth_analytics.jobs.automation_backtest``: the archive plus the
  journal's tail, one home per partition group), reached from ``hearth automation backtest``.

What they agree on:

* **The stretch** ``[from, to)``: the records whose Kafka timestamp is in ``[record_ms(from),
  record_ms(to))`` (the query API asks Kafka for those offsets with ``offsets_for_times``; Spark filters
  the timestamp column) and whose ``occurred_at`` is in ``[from, to)`` (``in_stretch``).
* **The order**: a home's facts are replayed by ``REPLAY_ORDER`` (``recorded_at``, then ``version``, then
  ``device_id``): its devices' facts are spread over the journal's partitions, each device's stay in
  version order, and the last key makes ties between devices come out the same in both readers.
* **What a fact is to the rules**: ``replayed(event)`` (its names, ``fact_names``; its device, time, and
  reported state).
* **Delayed triggers, as the live engine counts them** (the rules are ``automation_timers``', not a copy):
  a ``for_s`` state trigger's timer starts on the report that makes the test hold, a report that breaks
  it before it is due cancels it, and it fires at its due time (a report breaking it at or after the due
  time does not cancel it); a time trigger fires at each of its instants in ``[from, to)`` in the home's
  zone (``timezone``: the schedules' DST rules). Both are counted at their due time, with the conditions
  on the state replayed up to then: what is due before a fact's ``occurred_at`` fires before the fact is
  replayed, what is due at it after, and ``finish()`` fires what is due before ``to``. A fire's time
  (``fired_at``, ``fired_by_hour``) is the due time; a timer due at or after ``to`` is not counted.

Modes and the loop breaker are left out: they depend on the commands a replay does not send.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec

from hearth_shared.domain.automation import (
    Automation,
    FactNames,
    conditions_hold,
    fact_names,
    fact_triggers,
    state_triggers,
)
from hearth_shared.domain.automation_timers import timer_change, timer_due_at
from hearth_shared.domain.schedule import transitions, zone
from hearth_shared.schema.events import Event, StateReported

REPLAY_ORDER = ("recorded_at", "version", "device_id")
FIRED_AT_KEPT = 100

# (fact names, device, occurred_at, reported state or None): what the rules look at in a fact
Replayed = tuple[FactNames, str, datetime, dict[str, Any] | None]


class BacktestResult(msgspec.Struct, kw_only=True):
    facts: int = 0  # facts of the home read
    triggered: int = 0  # facts that matched the trigger
    fired: int = 0  # ... and whose conditions held: the runs it would have made
    fired_at: list[datetime] = []  # when (the trigger's time: a fact's, a due time), the first FIRED_AT_KEPT
    fired_by_hour: dict[datetime, int] = {}  # every run, counted by the UTC hour of its trigger


def record_ms(moment: datetime) -> int:
    """A stretch's bound as a Kafka record timestamp (ms; Kafka takes no negative ones)."""
    return max(0, int(moment.timestamp() * 1000))


def in_stretch(event: Event, home_id: str, start: datetime, end: datetime) -> bool:
    return event.home_id == home_id and start <= event.occurred_at < end


def replayed(event: Event) -> Replayed:
    state = event.payload.reported if isinstance(event, StateReported) else None
    return fact_names(event), event.device_id, event.occurred_at, state


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


class HomeReplay:
    """One home's facts over ``[start, end)``, in ``REPLAY_ORDER``, through any number of its automations at
    once (the devices' last reported state is the home's, shared by all of them). ``feed`` every fact of
    the stretch, then ``finish()`` once (the timers and time instants due before ``end``)."""

    def __init__(
        self, automations: Sequence[Automation], start: datetime, end: datetime, timezone: str
    ) -> None:
        self.automations = list(automations)
        self.results = {a.automation_id: BacktestResult() for a in self.automations}
        self.reported: dict[str, dict[str, Any]] = {}
        self.end = end
        self.pending: dict[int, datetime] = {}  # a for_s trigger's timer: automation's index -> due time
        tz = zone(timezone)  # a home's zone was checked when it was set
        # every time trigger's instants in [start, end), as the engine's ``time_due`` finds them
        self.instants = sorted(
            (t.instant, n)
            for n, a in enumerate(self.automations)
            if a.trigger.time is not None
            for t in transitions(a.trigger.time.as_program(), tz, start - timedelta(microseconds=1), end)
            if t.instant < end
        )

    def feed(self, fact: Replayed) -> None:
        names, device_id, at, state = fact
        self._due_before(at)
        before = dict(self.reported.get(device_id, {})) if state is not None else {}
        if state is not None:
            self.reported.setdefault(device_id, {}).update(state)
        for n, automation in enumerate(self.automations):
            self.results[automation.automation_id].facts += 1
            trigger = automation.trigger
            if trigger.state is not None and trigger.state.for_s is not None:
                if state is not None:
                    self._on_report(n, device_id, at, before, state)
            elif fact_triggers(trigger, names, device_id) or (
                state is not None and state_triggers(trigger, device_id, before, state)
            ):
                self._triggered(automation, at)
        self._due_before(at, inclusive=True)  # a time instant at the fact's own time sees the fact

    def finish(self) -> None:
        """Fire what is due before the stretch's end (a timer due at or after it never fired in it)."""
        self._due_before(self.end)
        self.pending.clear()

    def _on_report(
        self, n: int, device_id: str, at: datetime, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        trigger = self.automations[n].trigger
        change = timer_change(trigger, device_id, before, after)
        if change == "start" and n not in self.pending:
            self.pending[n] = timer_due_at(trigger, at)
        elif change == "stop":
            due_at = self.pending.pop(n, None)
            if due_at is not None and due_at <= at and due_at < self.end:  # it had held for for_s
                self._triggered(self.automations[n], due_at)

    def _due_before(self, moment: datetime, *, inclusive: bool = False) -> None:
        """Fire, in time order, the timers and time instants due before ``moment`` (or at it)."""
        if not self.pending and not self.instants:
            return  # (most facts of most homes: called twice a fact)
        while True:
            timer = min(self.pending.items(), key=lambda item: item[1], default=None)
            instant = self.instants[0] if self.instants else None
            due = [d for d in (timer and timer[1], instant and instant[0]) if d is not None]
            first = min(due, default=None)
            if first is None or first > moment or (first == moment and not inclusive) or first >= self.end:
                return
            if timer is not None and timer[1] == first:
                del self.pending[timer[0]]
                self._triggered(self.automations[timer[0]], first)
            else:
                assert instant is not None
                self.instants.pop(0)
                self._triggered(self.automations[instant[1]], first)

    def _triggered(self, automation: Automation, at: datetime) -> None:
        result = self.results[automation.automation_id]
        result.triggered += 1
        if all(conditions_hold(automation.conditions, self.reported)):
            result.fired += 1
            if len(result.fired_at) < FIRED_AT_KEPT:
                result.fired_at.append(at)
            hour = _hour(at)
            result.fired_by_hour[hour] = result.fired_by_hour.get(hour, 0) + 1


def backtest(
    automation: Automation,
    facts: Iterable[Replayed],
    start: datetime,
    end: datetime,
    timezone: str,
) -> BacktestResult:
    """Replay one home's facts of ``[start, end)`` (already in ``REPLAY_ORDER``) through one automation."""
    replay = HomeReplay([automation], start, end, timezone)
    for fact in facts:
        replay.feed(fact)
    replay.finish()
    return replay.results[automation.automation_id]
