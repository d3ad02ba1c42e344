"""The thermostat device type.

Commands: ``set_target_temperature`` {target_c} or {target_low_c, target_high_c}, ``set_hvac_mode``
{mode}. Targets are 7.0-35.0 degC in 0.5 steps, low below high. The single target is refused
(``wrong_mode``) while the thermostat is in ``heat_cool``; the low/high pair only in ``heat_cool`` or
``auto``. The mode judged is the desired one if a mode was asked, else the reported one. Telemetry:
``ambient_c`` and ``humidity_pct`` are rolled up and scored; heating and cooling minutes are rolled up;
``outdoor_c`` (the outdoor temperature where the home is) is rolled up, not scored. ``time_zone`` is the
home's; ``panel_changes`` counts targets set by hand on the device, so a report that changes it is a
manual change (the household's, not a command's).

Its card leads with the room's temperature and what the heating does now, the target with minus and
plus (a step of 0.5 °C) and the mode.
"""

from __future__ import annotations

from hearth_shared.domain.device_card import Card, choice, stepper
from hearth_shared.domain.device_type import (
    Command,
    CommandInvalid,
    DeviceType,
    Param,
    Setting,
    StateKey,
    StateMinutes,
    Value,
)
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import JSON

MODES = ("off", "heat", "cool", "heat_cool", "auto")
ACTIONS = ("off", "idle", "heating", "cooling")
PAIR_MODES = ("heat_cool", "auto")
MIN_C, MAX_C, STEP_C = 7.0, 35.0, 0.5
TARGET = Value("number", MIN_C, MAX_C, STEP_C, unit="degC")
MODE = Value(
    "string",
    values=MODES,
    labels={"off": "Off", "heat": "Heat", "cool": "Cool", "heat_cool": "Heat and cool", "auto": "Auto"},
)
ACTION = Value(
    "string",
    values=ACTIONS,
    labels={"off": "Off", "idle": "Idle", "heating": "Heating", "cooling": "Cooling"},
)


def _check(command: str, params: JSON) -> JSON:
    if "target_low_c" in params and params["target_low_c"] >= params["target_high_c"]:
        low, high = params["target_low_c"], params["target_high_c"]
        raise CommandInvalid("invalid_params", f"target_low_c {low} is not below target_high_c {high}")
    return params


def _plan(twin: Twin, command: str, params: JSON) -> tuple[str, JSON]:
    if command == "set_hvac_mode":
        return "hvac_mode", {"hvac_mode": params["mode"]}
    mode = twin.desired.get("hvac_mode", twin.reported.get("hvac_mode"))
    if "target_c" in params and mode == "heat_cool":
        raise CommandInvalid("wrong_mode", "in heat_cool mode, set target_low_c and target_high_c")
    if "target_low_c" in params and mode not in PAIR_MODES:
        raise CommandInvalid("wrong_mode", f"target_low_c/target_high_c need heat_cool or auto, not {mode}")
    return "target", dict(params)


TYPE = DeviceType(
    name="thermostat",
    label="Thermostat",
    description="Heating and cooling to a target temperature",
    state=(
        StateKey(
            "ambient_c", Value("number", unit="degC"), rollup=True, baseline=(21.0, 3.0), label="Temperature"
        ),
        StateKey(
            "humidity_pct",
            Value("number", 0, 100, unit="%"),
            rollup=True,
            baseline=(45.0, 10.0),
            min_std=2.0,  # a home hygrometer reads to about ±2-3 %
            label="Humidity",
        ),
        StateKey("hvac_mode", MODE, label="Mode"),
        StateKey("hvac_action", ACTION, label="Now"),
        StateKey("target_c", TARGET, label="Target"),
        StateKey("target_low_c", TARGET, label="Heat to"),
        StateKey("target_high_c", TARGET, label="Cool to"),
        StateKey(
            "outdoor_c",
            Value("number", unit="degC"),
            rollup=True,
            description="The outdoor temperature where the home is (the thermostat's weather feed)",
            label="Outdoor",
        ),
        StateKey(
            "time_zone",
            Value("string"),
            description="The home's IANA time zone, e.g. Europe/Berlin",
            label="Time zone",
        ),
        StateKey(
            "panel_changes",
            Value("integer", 0, unit="count"),
            description="Targets set by hand on the device's own panel, counted: a report that changes "
            "it carries a manual change",
            label="Set by hand",
        ),
    ),
    commands=(
        Command(
            "set_target_temperature",
            (
                (Param("target_c", TARGET, label="Target"),),
                (
                    Param("target_low_c", TARGET, label="Heat to"),
                    Param("target_high_c", TARGET, label="Cool to"),
                ),
            ),
            "One target, or a low/high pair in heat_cool or auto",
            label="Set target",
        ),
        Command(
            "set_hvac_mode",
            ((Param("mode", MODE, state_key="hvac_mode", label="Mode"),),),
            "Off, heat, cool, heat_cool or auto",
            label="Set mode",
        ),
    ),
    card=Card(
        primary=("ambient_c", "hvac_action"),
        controls=(
            stepper("target_c", "set_target_temperature", "target_c"),
            choice("hvac_mode", "set_hvac_mode", "mode"),
        ),
    ),
    settings=(Setting("target"), Setting("hvac_mode")),
    plan=_plan,
    check=_check,
    initial_reported={"hvac_mode": "off", "hvac_action": "off"},
    minutes=(
        StateMinutes("heating_minutes", "hvac_action", ("heating",)),
        StateMinutes("cooling_minutes", "hvac_action", ("cooling",)),
    ),
)
