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
  automation runs no more until it is switched on again.
"""

from __future__ import annotations

import uuid
from collections import deque
from datetime import datetime, timedelta
from typing import Literal

from hearth_shared.domain.automation import Mode, conditions_hold, fact_triggers, state_triggers

__all__ = ["LoopBreaker", "admit", "conditions_hold", "fact_triggers", "state_triggers"]

Admission = Literal["start", "drop", "queue"]


def admit(mode: Mode, running: int) -> Admission:
    """What a trigger does while ``running`` runs of the automation are on."""
    if running == 0 or mode in ("parallel", "restart"):
        return "start"
    return "queue" if mode == "queued" else "drop"


class LoopBreaker:
    """Per automation: the command ids it sent (to know facts its own actions caused) and its recent
    run times. ``check`` says why it must be suspended, or None."""

    def __init__(self, max_runs_per_minute: int, remembered: int = 1024) -> None:
        self.max_runs = max_runs_per_minute
        self.sent: deque[uuid.UUID] = deque(maxlen=remembered)
        self.runs: deque[datetime] = deque()

    def check(self, caused_by: uuid.UUID | None, at: datetime) -> str | None:
        if caused_by is not None and caused_by in self.sent:
            return "own_action"
        while self.runs and self.runs[0] <= at - timedelta(minutes=1):
            self.runs.popleft()
        if len(self.runs) >= self.max_runs:
            return "too_many_runs"
        return None

    def ran(self, at: datetime, command_ids: list[uuid.UUID]) -> None:
        self.runs.append(at)
        self.sent.extend(command_ids)
