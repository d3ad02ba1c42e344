"""What an automation is (the contract's ``POST /v1/automations`` body, as a fact), checked whole; and the
ids a run and its actions take. Pure; the automations service decides with
``hearth_automations.service.rules``.

* A run's id is derived from (automation, trigger fact), and each action's id from (run, action index): a
  crash and a replay of the same trigger fact send the same command ids (the device actor records each
  once) and record the same run id (folded once). A notify action's id is its notification's dedupe key.
* A state trigger with ``for_s`` fires once the test has held that long (the edge's fact starts the
  timer, a report that breaks the test stops it; ``hearth_shared.domain.automation_timers``); a time
  trigger ``{"time": {"at", "days"?}}`` fires at that wall-clock time in the home's zone, with the
  schedules' DST rules. A time run's trigger id is derived from (automation, instant) (``time_trigger_id``),
  so its run and command ids are too: each instant acts once, restarts included.
* A fact trigger names a wire type, and a fact answers to its own (``fact_names``) and, for a
  ``device.desired_set`` of a thermostat's or lock's setting, to the name of the retired fact that
  recorded that setting before (``thermostat.target_set``, ``thermostat.hvac_mode_set``,
  ``lock.desired_state_set``; ``hearth_shared.schema.device_facts.RETIRED_SETTING_FACTS``): the contract's
  triggers name wire types, so an automation written against a retired name fires as it did, on old
  facts (upcast when read) and new ones alike.
* ``not_equals`` is a test the corrective defaults use (``hearth_automations.service.defaults``); the API
  takes the contract's ``above`` / ``below`` / ``equals``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec

from hearth_shared.domain.schedule import DAYS, ProgramEntry, ScheduledCommand, ScheduleInvalid, check_program
from hearth_shared.schema.events import RETIRED_SETTING_FACTS, DesiredStateSet, Event

AUTOMATION_NAMESPACE = uuid.UUID("5e2b8f61-0c4a-4b7e-a1d3-9f6c2e8b7a05")
Mode = Literal["single", "restart", "queued", "parallel"]
DEFAULT_MAX_RUNS_PER_MINUTE = 20
MAX_FOR_S = 7 * 24 * 3600.0  # a week: a longer wait is a time trigger's job
TIME_TRIGGER = "time"  # a time run's trigger type (no journal fact is its trigger)
FactNames = tuple[str, ...]  # the names a fact answers to in a fact trigger (``fact_names``)
_RETIRED_NAME_OF_SETTING = {setting: name for name, setting in RETIRED_SETTING_FACTS.items()}


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
    not_equals: Any = None
    for_s: float | None = None  # a trigger's only: fire once the test has held this long

    def holds(self, value: Any) -> bool:
        if self.equals is not None:
            return bool(value == self.equals)
        if self.not_equals is not None:
            return bool(value != self.not_equals)
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        if self.above is not None and not value > self.above:
            return False
        return not (self.below is not None and not value < self.below)


class TimeOfDay(msgspec.Struct, frozen=True, kw_only=True):
    """A time trigger: ``at`` (``HH:MM``, or ``HH:MM:SS``, as a schedule's entry) on ``days``."""

    at: str
    days: tuple[str, ...] = DAYS

    def as_program(self) -> list[ProgramEntry]:
        """The same as a one-entry schedule program, so its instants are the schedule's computation."""
        return [ProgramEntry(days=self.days, at=self.at, command=ScheduledCommand(name=TIME_TRIGGER))]


class Trigger(msgspec.Struct, frozen=True, kw_only=True):
    fact: str | None = None
    device_id: str | None = None
    state: StateTest | None = None
    time: TimeOfDay | None = None


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
    if sum(t is not None for t in (trigger.fact, trigger.state, trigger.time)) != 1:
        raise RuleInvalid("invalid_trigger", "a trigger is one of {fact}, {state} or {time}", ("trigger",))
    if trigger.device_id is not None and trigger.fact is None:
        raise RuleInvalid("invalid_trigger", "device_id belongs to a fact trigger", ("trigger", "device_id"))
    if trigger.time is not None:
        _check_time(trigger.time)
    for i, test in enumerate((*([trigger.state] if trigger.state else []), *conditions)):
        is_trigger = trigger.state is not None and i == 0
        where: tuple[str | int, ...] = ("trigger", "state") if is_trigger else ("conditions",)
        given = sum(v is not None for v in (test.above, test.below, test.equals, test.not_equals))
        alone = test.equals is not None or test.not_equals is not None
        if given == 0 or (alone and given > 1):
            raise RuleInvalid("invalid_test", "give above and/or below, or equals alone", where)
        if test.for_s is not None and not is_trigger:
            raise RuleInvalid(
                "for_s_in_condition", "for_s belongs to a state trigger; a condition tests the last "
                "reported value", (*where, "for_s"),
            )  # fmt: skip
        if test.for_s is not None and not 0 < test.for_s <= MAX_FOR_S:
            raise RuleInvalid(
                "invalid_for_s", f"for_s is above 0 and at most {MAX_FOR_S:.0f}", (*where, "for_s")
            )
    if not actions:
        raise RuleInvalid("no_actions", "an automation needs at least one action", ("actions",))
    for i, action in enumerate(actions):
        if (action.command is None) == (action.notify is None):
            raise RuleInvalid("invalid_action", "an action is either {command} or {notify}", ("actions", i))


def _check_time(time: TimeOfDay) -> None:
    """A time trigger is checked as the one-entry program it is (the schedules' own check)."""
    try:
        check_program(time.as_program())
    except ScheduleInvalid as exc:
        raise RuleInvalid(exc.reason, exc.message, ("trigger", "time", *exc.where[1:])) from exc


def run_id(automation_id: uuid.UUID, trigger_fact_id: uuid.UUID) -> uuid.UUID:
    return uuid.uuid5(AUTOMATION_NAMESPACE, f"run\n{automation_id}\n{trigger_fact_id}")


def time_trigger_id(automation_id: uuid.UUID, instant: datetime) -> uuid.UUID:
    """What stands for the trigger fact of a time run: one per (automation, instant), in every process."""
    return uuid.uuid5(AUTOMATION_NAMESPACE, f"time\n{automation_id}\n{instant.astimezone(UTC).isoformat()}")


def action_id(run: uuid.UUID, index: int) -> uuid.UUID:
    """A command action's command id, or a notify action's dedupe key: one per (run, action)."""
    return uuid.uuid5(AUTOMATION_NAMESPACE, f"action\n{run}\n{index}")


def fact_names(event: Event) -> FactNames:
    """The names a fact answers to in a fact trigger: its wire type, and for a ``device.desired_set`` of a
    setting a retired fact recorded, that fact's name too (``thermostat.target_set``...)."""
    if isinstance(event, DesiredStateSet):
        retired = _RETIRED_NAME_OF_SETTING.get(event.payload.setting)
        if retired is not None:
            return (event.type, retired)
    return (event.type,)


def fact_triggers(trigger: Trigger, names: FactNames, device_id: str) -> bool:
    """A fact trigger names one of the fact's names (``fact_names``), and its device if it names one."""
    return trigger.fact in names and (trigger.device_id is None or trigger.device_id == device_id)


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
