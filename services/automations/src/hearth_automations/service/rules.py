"""Automations, pure: whether a fact triggers an automation, whether its conditions hold, what its mode
admits, and when the loop breaker suspends it. No I/O, no clock (every function takes the time it
reasons about); on the import-linter purity contract. What an automation *is* (its definition and the
ids of its runs and actions) is ``hearth_shared.domain.automation``, shared with the APIs.

* **Triggers**: ``{"fact": wire type, "device_id"?}`` (any fact of that type, of that device or any of
  the home's); ``{"state": {"device_id", "key", "above" | "below" | "equals"}}``, which fires when a
  report moves the value from not matching to matching (an edge, not every report while it matches).
* **Conditions**: state tests on the devices' last reported values, all of which must hold.
* **Modes**: a run lasts until its commands end. ``single`` drops a trigger while a run is on,
  ``restart`` starts the new run anyway (the old one's commands are superseded by the actor where they
  set the same thing), ``queued`` keeps it for when the run ends, ``parallel`` starts it.
* **Loop breaker**: a trigger fact caused by one of this automation's own commands (its
  ``correlation_id`` is a command id the automation sent) suspends it with reason ``own_action``; more
  than ``max_runs_per_minute`` runs in the last minute suspends it with ``too_many_runs``. A suspended
  automation runs no more until it is switched on again. A command's facts all come before its deadline,
  so the breaker remembers a command id for ``remember`` (the engine: the commands' lifetime and an hour)
  after the run that sent it, and at most ``remembered`` ids: its memory, and the engine's snapshot, hold
  what can still come back, not every command the automation ever sent.
"""

from __future__ import annotations

import uuid
from collections import deque
from datetime import datetime, timedelta
from typing import Literal

from hearth_shared.domain.automation import Mode, conditions_hold, fact_names, fact_triggers, state_triggers

__all__ = ["LoopBreaker", "admit", "conditions_hold", "fact_names", "fact_triggers", "state_triggers"]

Admission = Literal["start", "drop", "queue"]


def admit(mode: Mode, running: int) -> Admission:
    """What a trigger does while ``running`` runs of the automation are on."""
    if running == 0 or mode in ("parallel", "restart"):
        return "start"
    return "queue" if mode == "queued" else "drop"


class LoopBreaker:
    """Per automation: the command ids it sent lately (to know facts its own actions caused) and its
    run times of the last minute. ``check`` says why it must be suspended, or None. All times are fact
    times (the trigger's), so a replay decides as the live run did."""

    def __init__(
        self, max_runs_per_minute: int, remember: timedelta = timedelta(hours=1), remembered: int = 1024
    ) -> None:
        self.max_runs = max_runs_per_minute
        self.remember = remember
        self.remembered = remembered
        self.sent: dict[uuid.UUID, datetime] = {}  # command -> its run's trigger time, oldest first
        self.runs: deque[datetime] = deque()

    def check(self, caused_by: uuid.UUID | None, at: datetime) -> str | None:
        self._forget_before(at - self.remember)
        if caused_by is not None and caused_by in self.sent:
            return "own_action"
        while self.runs and self.runs[0] <= at - timedelta(minutes=1):
            self.runs.popleft()
        if len(self.runs) >= self.max_runs:
            return "too_many_runs"
        return None

    def ran(self, at: datetime, command_ids: list[uuid.UUID]) -> None:
        self.runs.append(at)
        for command_id in command_ids:
            self.sent[command_id] = at
        while len(self.sent) > self.remembered:
            del self.sent[next(iter(self.sent))]

    def _forget_before(self, horizon: datetime) -> None:
        while self.sent:
            oldest = next(iter(self.sent))
            if self.sent[oldest] > horizon:
                return
            del self.sent[oldest]
