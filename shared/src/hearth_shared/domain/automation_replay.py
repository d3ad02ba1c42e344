"""The backtest: a home's facts replayed through its automations' triggers and conditions, acting on
nothing. Pure. Two readers feed it and must count alike, so everything they must agree on is here:

* the query API (``POST /v1/automations/{id}/backtest``: a short stretch, read from the journal in the
  request, ``hearth_read_models.backtest_views``);
* the Spark job for long stretches (``hearth_analytics.automation_backtest``: the archive plus the
  journal's tail, one home per partition group), reached from ``hearth automation backtest``.

What they agree on:

* **The stretch** ``[from, to)``: the records whose Kafka timestamp is in ``[record_ms(from),
  record_ms(to))`` (the query API asks Kafka for those offsets with ``offsets_for_times``; Spark filters
  the timestamp column) and whose ``occurred_at`` is in ``[from, to)`` (``in_stretch``).
* **The order**: a home's facts are replayed by ``REPLAY_ORDER`` (``recorded_at``, then ``version``, then
  ``device_id``): its devices' facts are spread over the journal's partitions, each device's stay in
  version order, and the last key makes ties between devices come out the same in both readers.
* **What a fact is to the rules**: ``replayed(event)`` (its type, device, time, and reported state).

Modes and the loop breaker are left out: they depend on the commands a replay does not send.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import msgspec

from hearth_shared.domain.automation import (
    Automation,
    conditions_hold,
    fact_triggers,
    state_triggers,
)
from hearth_shared.events import Event, StateReported

REPLAY_ORDER = ("recorded_at", "version", "device_id")
FIRED_AT_KEPT = 100

# (fact type, device, occurred_at, reported state or None): what the rules look at in a fact
Replayed = tuple[str, str, datetime, dict[str, Any] | None]


class BacktestResult(msgspec.Struct, kw_only=True):
    facts: int = 0  # facts of the home read
    triggered: int = 0  # facts that matched the trigger
    fired: int = 0  # ... and whose conditions held: the runs it would have made
    fired_at: list[datetime] = []  # when (the trigger facts' times), the first FIRED_AT_KEPT
    fired_by_hour: dict[datetime, int] = {}  # every run, counted by the UTC hour of its trigger fact


def record_ms(moment: datetime) -> int:
    """A stretch's bound as a Kafka record timestamp (ms; Kafka takes no negative ones)."""
    return max(0, int(moment.timestamp() * 1000))


def in_stretch(event: Event, home_id: str, start: datetime, end: datetime) -> bool:
    return event.home_id == home_id and start <= event.occurred_at < end


def replayed(event: Event) -> Replayed:
    state = event.payload.reported if isinstance(event, StateReported) else None
    return event.type, event.device_id, event.occurred_at, state


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


class HomeReplay:
    """One home's facts, in ``REPLAY_ORDER``, through any number of its automations at once (the devices'
    last reported state is the home's, shared by all of them)."""

    def __init__(self, automations: Sequence[Automation]) -> None:
        self.automations = list(automations)
        self.results = {a.automation_id: BacktestResult() for a in self.automations}
        self.reported: dict[str, dict[str, Any]] = {}

    def feed(self, fact: Replayed) -> None:
        fact_type, device_id, at, state = fact
        before = dict(self.reported.get(device_id, {})) if state is not None else {}
        if state is not None:
            self.reported.setdefault(device_id, {}).update(state)
        for automation in self.automations:
            result = self.results[automation.automation_id]
            result.facts += 1
            hit = fact_triggers(automation.trigger, fact_type, device_id) or (
                state is not None and state_triggers(automation.trigger, device_id, before, state)
            )
            if not hit:
                continue
            result.triggered += 1
            if all(conditions_hold(automation.conditions, self.reported)):
                result.fired += 1
                if len(result.fired_at) < FIRED_AT_KEPT:
                    result.fired_at.append(at)
                hour = _hour(at)
                result.fired_by_hour[hour] = result.fired_by_hour.get(hour, 0) + 1


def backtest(automation: Automation, facts: Iterable[Replayed]) -> BacktestResult:
    """Replay one home's facts (already in ``REPLAY_ORDER``) through one automation."""
    replay = HomeReplay([automation])
    for fact in facts:
        replay.feed(fact)
    return replay.results[automation.automation_id]
