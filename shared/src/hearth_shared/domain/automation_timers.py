"""When an automation's delayed triggers fire: a state trigger held for ``for_s``, and a time trigger.

Pure (no clock, no I/O): the automations engine (``hearth_automations.service.engine``) keeps the pending
timers and asks these functions, with the time it reasons about.

* **Held for ``for_s``**: the report that makes the test hold (the edge, as a plain state trigger's) starts
  a timer due at that fact's ``occurred_at + for_s``; a report of the key that breaks the test stops it.
  Nothing but the journal makes a timer: a restarted engine replays the device journal and has the same
  pending timers (the edge fact and its time), fires those now due once (the run id is derived from
  (automation, edge fact), and a run already in the home journal is not run again), and a report that
  broke the test *after* the timer was due does not cancel it (the test had held for ``for_s``).
* **Time triggers**: the instants of ``{"at", "days"}`` in the home's zone are the ones a one-entry
  schedule program has (``hearth_shared.domain.schedule.transitions``): the same DST rules (a skipped
  time fires at the end of the gap, a repeated one at its first occurrence). Due now is the latest
  instant after the automation was created and after the last instant it ran for: after an outage, the
  latest one missed, once, as a schedule's transition in force (not every one missed).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from hearth_shared.domain.automation import TimeOfDay, Trigger
from hearth_shared.domain.schedule import next_after, transitions

TimerChange = Literal["start", "stop"]
_LOOK_BACK = timedelta(days=8)  # a weekly trigger has an instant within any 8 days


def timer_change(
    trigger: Trigger, device_id: str, before: dict[str, Any], after: dict[str, Any]
) -> TimerChange | None:
    """What a report of ``device_id`` (``before`` -> ``after``, its reported keys) does to a ``for_s``
    trigger's timer: ``start`` on the edge into the test, ``stop`` when the key no longer passes it."""
    test = trigger.state
    if test is None or test.for_s is None or test.device_id != device_id or test.key not in after:
        return None
    if not test.holds(after[test.key]):
        return "stop"
    held = test.key in before and test.holds(before[test.key])
    return None if held else "start"


def timer_due_at(trigger: Trigger, edge_at: datetime) -> datetime:
    """When a ``for_s`` timer started by a fact at ``edge_at`` is due."""
    assert trigger.state is not None and trigger.state.for_s is not None
    return edge_at + timedelta(seconds=trigger.state.for_s)


def time_due(time: TimeOfDay, tz: ZoneInfo, after: datetime, now: datetime) -> datetime | None:
    """The latest instant of ``time`` in (``after``, ``now``], or None."""
    start = max(after, now - _LOOK_BACK)
    latest = None
    for transition in transitions(time.as_program(), tz, start, now):
        latest = transition.instant
    return latest


def time_next(time: TimeOfDay, tz: ZoneInfo, now: datetime) -> datetime | None:
    """The first instant of ``time`` after ``now`` (when to look again)."""
    following = next_after(time.as_program(), tz, now)
    return following.instant if following else None
