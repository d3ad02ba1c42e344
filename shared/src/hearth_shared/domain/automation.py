"""What an automation is (the contract's ``POST /v1/automations`` body, as a fact), checked whole; and the
ids a run and its actions take. Pure; the automations service decides with ``hearth_automations.rules``.

* A run's id is derived from (automation, trigger fact), and each action's id from (run, action index): a
  crash and a replay of the same trigger fact send the same command ids (the device actor records each
  once) and record the same run id (folded once). A notify action's id is its notification's dedupe key.
* ``for_s`` and time triggers are refused for now (``not_supported_yet``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

import msgspec

AUTOMATION_NAMESPACE = uuid.UUID("5e2b8f61-0c4a-4b7e-a1d3-9f6c2e8b7a05")
Mode = Literal["single", "restart", "queued", "parallel"]
DEFAULT_MAX_RUNS_PER_MINUTE = 20


class RuleInvalid(ValueError):
    def __init__(self, reason: str, message: str, where: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.reason, self.message, self.where = reason, message, where


class StateTest(msgspec.Struct, frozen=True, kw_only=True):
    device_id: str
    key: str
    above: float | None = None
    below: float | None = None
    equals: Any = None

    def holds(self, value: Any) -> bool:
        if self.equals is not None:
            return bool(value == self.equals)
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        if self.above is not None and not value > self.above:
            return False
        return not (self.below is not None and not value < self.below)


class Trigger(msgspec.Struct, frozen=True, kw_only=True):
    fact: str | None = None
    device_id: str | None = None
    state: StateTest | None = None


class CommandAction(msgspec.Struct, frozen=True, kw_only=True):
    device_id: str
    name: str
    params: dict[str, Any] = {}


class NotifyAction(msgspec.Struct, frozen=True, kw_only=True):
    message: str


class Action(msgspec.Struct, frozen=True, kw_only=True):
    command: CommandAction | None = None
    notify: NotifyAction | None = None


class Automation(msgspec.Struct, frozen=True, kw_only=True):
    automation_id: uuid.UUID
    home_id: str
    name: str
    trigger: Trigger
    conditions: tuple[StateTest, ...] = ()
    actions: tuple[Action, ...]
    mode: Mode = "single"
    max_runs_per_minute: int = DEFAULT_MAX_RUNS_PER_MINUTE
    created_at: datetime


def check_rule(trigger: Trigger, conditions: tuple[StateTest, ...], actions: tuple[Action, ...]) -> None:
    if (trigger.fact is None) == (trigger.state is None):
        raise RuleInvalid("invalid_trigger", "a trigger is either {fact} or {state}", ("trigger",))
    for i, test in enumerate((*([trigger.state] if trigger.state else []), *conditions)):
        given = sum(v is not None for v in (test.above, test.below, test.equals))
        if given == 0 or (test.equals is not None and given > 1):
            where: tuple[str | int, ...] = (
                ("trigger", "state") if trigger.state and i == 0 else ("conditions",)
            )
            raise RuleInvalid("invalid_test", "give above and/or below, or equals alone", where)
    if not actions:
        raise RuleInvalid("no_actions", "an automation needs at least one action", ("actions",))
    for i, action in enumerate(actions):
        if (action.command is None) == (action.notify is None):
            raise RuleInvalid("invalid_action", "an action is either {command} or {notify}", ("actions", i))


def run_id(automation_id: uuid.UUID, trigger_fact_id: uuid.UUID) -> uuid.UUID:
    return uuid.uuid5(AUTOMATION_NAMESPACE, f"run\n{automation_id}\n{trigger_fact_id}")


def action_id(run: uuid.UUID, index: int) -> uuid.UUID:
    """A command action's command id, or a notify action's dedupe key: one per (run, action)."""
    return uuid.uuid5(AUTOMATION_NAMESPACE, f"action\n{run}\n{index}")


def fact_triggers(trigger: Trigger, fact_type: str, device_id: str) -> bool:
    return trigger.fact == fact_type and (trigger.device_id is None or trigger.device_id == device_id)


def state_triggers(trigger: Trigger, device_id: str, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """A report moved ``key`` from not matching to matching (the edge)."""
    test = trigger.state
    if test is None or test.device_id != device_id or test.key not in after:
        return False
    return test.holds(after[test.key]) and not (test.key in before and test.holds(before[test.key]))


def conditions_hold(conditions: tuple[StateTest, ...], reported: dict[str, dict[str, Any]]) -> list[bool]:
    """Each condition's result on the devices' last reported state (a missing value does not hold)."""
    results = []
    for test in conditions:
        state = reported.get(test.device_id, {})
        results.append(test.key in state and test.holds(state[test.key]))
    return results
