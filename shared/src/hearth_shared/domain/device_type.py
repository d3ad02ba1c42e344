"""What a device type declares about itself. Each type is one module (thermostat.py, lock.py, light.py)
that builds one ``DeviceType`` and is listed once in registry.py; everything else derives from it:

* **validation** of a command's params (``validate``: the schema, then the type's own ``check``),
* the **JSON schema** of its state and commands (``schema()``: the query API serves it, the live page
  draws its controls from it, the command API's OpenAPI description lists it),
* **convergence** with per-key tolerances (``converged``; the twin's ``delta`` uses the same rule),
* its **settings** (supersede groups), each recorded with the generic ``device.desired_set`` fact, so a
  new type needs no edit in the event schema (the thermostat's and lock's older facts of their own are
  read as that fact: ``hearth_shared.schema.device_facts.RETIRED_SETTING_FACTS``),
* **analytics**: the telemetry keys rolled up (``StateKey.rollup``) and scored (``StateKey.baseline``,
  which is also the default anomaly model's type-level baseline), time-in-state minutes (``durations``)
  and state-entry counts (``counts``),
* **how a person reads it**: the type's, each key's and each param's ``label`` ("Temperature"), each
  number's unit (``Value.unit``, written as ``device_card.UNIT_SYMBOLS`` says: "°C"), each text value's
  words (``Value.labels``: ``heating`` -> "Heating"), and its ``card`` (the keys and controls a card
  leads with, device_card.py). The schema carries them as JSON schema's ``title`` and the extensions
  ``x-unit``, ``x-unit-symbol`` and ``x-labels``, so the live page writes "Temperature 16.8 °C, Heating"
  from the declaration alone.

Keys every type reports (``firmware_version``) and commands every type takes (``SHARED_COMMANDS``,
for admin commands) are declared once here, not per type. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hearth_shared.domain.device_card import UNIT_SYMBOLS, Card
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import JSON

JsonType = Literal["number", "integer", "string", "boolean"]
# plan(twin, command, params) -> (setting, desired keys), or raise CommandInvalid (the state rules).
Planner = Callable[[Twin, str, JSON], tuple[str, JSON]]


class CommandInvalid(ValueError):
    """A command that cannot be carried out; ``reason`` is short and machine-readable."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Value:
    """A JSON value's rules: its type, and a range and step (numbers) or the allowed values (text); its
    ``unit`` (a key of ``device_card.UNIT_SYMBOLS``) and the words each of ``values`` is shown as."""

    type: JsonType
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None
    values: tuple[str, ...] = ()
    unit: str = ""
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)

    def json_schema(self) -> JSON:
        schema: JSON = {"type": self.type}
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        if self.step is not None:
            schema["multipleOf"] = self.step
        if self.values:
            schema["enum"] = list(self.values)
        if self.unit:
            schema["x-unit"] = self.unit
            schema["x-unit-symbol"] = UNIT_SYMBOLS.get(self.unit, self.unit)
        if self.labels:
            schema["x-labels"] = dict(self.labels)
        return schema

    def check(self, key: str, value: Any) -> Any:
        """``value`` normalized (integers given for numbers become floats), or ``CommandInvalid``."""
        if self.type in ("number", "integer"):
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise CommandInvalid("invalid_params", f"{key} must be a number, not {value!r}")
            if self.type == "integer" and not float(value).is_integer():
                raise CommandInvalid("invalid_params", f"{key} must be a whole number, not {value!r}")
            low = -math.inf if self.minimum is None else self.minimum
            high = math.inf if self.maximum is None else self.maximum
            if not low <= value <= high:
                bounds = f"{self.minimum}-{self.maximum}"
                raise CommandInvalid("out_of_range", f"{key} {value} is outside {bounds}")
            if self.step is not None and not (value / self.step).is_integer():
                raise CommandInvalid("invalid_step", f"{key} {value} is not a multiple of {self.step}")
            return int(value) if self.type == "integer" else float(value)
        if self.type == "boolean":
            if not isinstance(value, bool):
                raise CommandInvalid("invalid_params", f"{key} must be true or false, not {value!r}")
            return value
        if not isinstance(value, str) or (self.values and value not in self.values):
            allowed = f"one of {', '.join(self.values)}" if self.values else "text"
            raise CommandInvalid("invalid_params", f"{key} must be {allowed}, not {value!r}")
        return value


@dataclass(frozen=True)
class StateKey:
    """A reported (and maybe desired) key. ``tolerance``: how far a reported number may be from the
    desired one and still count as reached. ``rollup``: a numeric telemetry key the analytics roll up
    (count, mean, min, max per window). ``baseline``: (mean, std) of a scored key, the default anomaly
    model's type-level baseline; a key with a baseline is scored by the device actor. ``min_std``: the
    smallest spread the scorer grants a baseline of the key, about its sensor's accuracy: a baseline learnt
    from a flat stretch of readings must not make every later wobble an anomaly. ``label``: the key as a
    person reads it ("Temperature")."""

    name: str
    value: Value
    tolerance: float = 0.0
    rollup: bool = False
    baseline: tuple[float, float] | None = None
    min_std: float = 0.25
    description: str = ""
    label: str = ""


@dataclass(frozen=True)
class Param:
    """A command's param; ``state_key``: the state key it sets, if named otherwise (a control shows
    that key's desired or reported value as its starting value); ``label``: the param as a person reads
    it."""

    name: str
    value: Value
    required: bool = True
    state_key: str = ""
    label: str = ""


@dataclass(frozen=True)
class Command:
    """A command and its params. ``forms``: the sets of params it accepts (most commands have one; a
    thermostat's target is {target_c} or {target_low_c, target_high_c}). ``admin``: only an admin token
    may send it (admin commands are shared by every type: ``SHARED_COMMANDS``)."""

    name: str
    forms: tuple[tuple[Param, ...], ...] = ((),)
    description: str = ""
    admin: bool = False
    label: str = ""  # a control's caption; the name, capitalized, when not given
    # The command's own planner (a shared command plans the same for every type); None: the type's plan.
    plan: Planner | None = None

    @property
    def caption(self) -> str:
        return self.label or self.name.replace("_", " ").capitalize()

    def params_schema(self) -> JSON:
        def form(params: tuple[Param, ...]) -> JSON:
            return {
                "type": "object",
                "properties": {
                    p.name: {
                        **p.value.json_schema(),
                        **({"title": p.label} if p.label else {}),
                        **({"x-state-key": p.state_key} if p.state_key else {}),
                    }
                    for p in params
                },
                "required": [p.name for p in params if p.required],
                "additionalProperties": False,
            }

        if len(self.forms) == 1:
            return form(self.forms[0])
        return {"oneOf": [form(f) for f in self.forms]}

    def validate(self, params: JSON) -> JSON:
        given = set(params)
        for params_of_form in self.forms:
            names = {p.name for p in params_of_form}
            required = {p.name for p in params_of_form if p.required}
            if required <= given <= names:
                return {
                    p.name: p.value.check(p.name, params[p.name]) for p in params_of_form if p.name in given
                }
        shapes = " or ".join(
            "{" + ", ".join(p.name + ("" if p.required else "?") for p in f) + "}" for f in self.forms
        )
        if shapes == "{}":
            raise CommandInvalid("invalid_params", f"{self.name} takes no params")
        raise CommandInvalid("invalid_params", f"{self.name} takes {shapes}")


@dataclass(frozen=True)
class Setting:
    """A supersede group (a newer accepted command for it supersedes an older one not yet dispatched);
    ``device.desired_set`` records its desired keys with its name. The names the retired thermostat and
    lock facts recorded (``target``, ``hvac_mode``, ``lock``) are theirs alone: an automation triggered by
    a retired fact's name matches the generic fact by that setting (tests/unit/test_retired_facts.py)."""

    name: str


@dataclass(frozen=True)
class StateMinutes:
    """A rollup of minutes spent in a state: ``name`` counts the time ``key`` was one of ``values``."""

    name: str
    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class StateCount:
    """A rollup counting readings that report ``key`` at one of ``values`` (e.g. lock operations)."""

    name: str
    key: str
    values: tuple[str, ...]


def _no_failure(reported: JSON) -> str | None:
    return None


def _no_check(command: str, params: JSON) -> JSON:
    return params


# Keys every device reports, whatever its type.
SHARED_STATE: tuple[StateKey, ...] = (
    StateKey(
        "firmware_version", Value("string"), description="the firmware the device runs", label="Firmware"
    ),
)
# Commands every device takes (admin commands: reboot, update_firmware...), declared once here with
# ``admin=True`` and their own ``plan`` (the same for every type); a setting they name is recorded with
# its admin fact (``hearth_shared.domain.admin.ADMIN_SETTINGS``) or the generic ``device.desired_set``.
SHARED_COMMANDS: tuple[Command, ...] = ()


@dataclass(frozen=True)
class DeviceType:
    """Everything about one device type. ``plan(twin, command, params) -> (setting, desired keys)``
    applies the type's state rules to validated params (or raises ``CommandInvalid``); ``check`` adds
    rules between params (low below high); ``failure(reported)`` names a state that fails every command
    in flight (a jammed lock). A report that is not (yet) what was asked fails nothing: a light in a
    transition reports the way there, and its command converges once a report is within tolerance.
    ``label`` names the type for a person ("Thermostat"); ``card`` is what its card leads with."""

    name: str
    description: str
    state: tuple[StateKey, ...]
    commands: tuple[Command, ...]
    settings: tuple[Setting, ...]
    plan: Planner
    initial_reported: Mapping[str, Any] = field(default_factory=dict)
    check: Callable[[str, JSON], JSON] = _no_check
    failure: Callable[[JSON], str | None] = _no_failure
    minutes: tuple[StateMinutes, ...] = ()
    counts: tuple[StateCount, ...] = ()
    label: str = ""
    card: Card = field(default_factory=Card)

    @property
    def all_state(self) -> tuple[StateKey, ...]:
        return (*SHARED_STATE, *self.state)

    @property
    def all_commands(self) -> tuple[Command, ...]:
        return (*self.commands, *SHARED_COMMANDS)

    def command(self, name: str) -> Command:
        found = next((c for c in self.all_commands if c.name == name), None)
        if found is None:
            raise CommandInvalid("unknown_command", f"a {self.name} has no command {name!r}")
        return found

    def validate(self, command: str, params: JSON) -> JSON:
        """Normalized params, or raise ``CommandInvalid``. Stateless: the HTTP API answers 422 with it."""
        return self.check(command, self.command(command).validate(params))

    def plan_command(self, twin: Twin, command: str, params: JSON) -> tuple[str, JSON]:
        """``(setting, desired keys)`` for validated params: the command's own planner, else the type's."""
        return (self.command(command).plan or self.plan)(twin, command, params)

    def matches(self, key: str, desired: Any, reported: JSON) -> bool:
        """Whether the device reports ``key`` at ``desired``, within the key's tolerance."""
        if key not in reported:
            return False
        value = reported[key]
        tolerance = next((k.tolerance for k in self.all_state if k.name == key), 0.0)
        if tolerance and _number(value) and _number(desired):
            return bool(abs(value - desired) <= tolerance)
        return bool(value == desired)

    def converged(self, desired: JSON, reported: JSON) -> bool:
        """Whether the device reached what a command desired."""
        return all(self.matches(key, value, reported) for key, value in desired.items())

    def schema(self) -> JSON:
        """The type as JSON: state keys, commands with their params schema, how a person reads them and
        what its card leads with (the query API serves it)."""
        return {
            "type": self.name,
            "label": self.label or self.name.capitalize(),
            "description": self.description,
            "state": {
                k.name: {
                    **k.value.json_schema(),
                    **({"title": k.label} if k.label else {}),
                    **({"tolerance": k.tolerance} if k.tolerance else {}),
                    **({"description": k.description} if k.description else {}),
                    "telemetry": k.rollup,
                }
                for k in self.all_state
            },
            "commands": {
                c.name: {
                    "label": c.caption,
                    "description": c.description,
                    "admin": c.admin,
                    "params": c.params_schema(),
                }
                for c in self.all_commands
            },
            "rollups": [k.name for k in self.state if k.rollup]
            + [m.name for m in self.minutes]
            + [c.name for c in self.counts],
            "card": self.card.as_json(),
        }


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
