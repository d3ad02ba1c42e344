"""The thermostat device type.

Commands: ``set_target_temperature`` {target_c} or {target_low_c, target_high_c}, ``set_hvac_mode``
{mode}. Targets are 7.0-35.0 degC in 0.5 steps. The single target is refused (``wrong_mode``) while the
thermostat is in ``heat_cool``; the low/high pair only in ``heat_cool`` or ``auto``. The mode judged is the
desired one if a mode was asked, else the reported one.
"""

from __future__ import annotations

from collections.abc import Mapping

from hearth_shared.domain.device_type import CommandInvalid
from hearth_shared.domain.twin import Twin, same_as_reported
from hearth_shared.events import JSON, Event, ThermostatHvacModeSet, ThermostatTargetSet

name = "thermostat"
settings: Mapping[str, type[Event]] = {"target": ThermostatTargetSet, "hvac_mode": ThermostatHvacModeSet}

MODES = ("off", "heat", "cool", "heat_cool", "auto")
PAIR_MODES = ("heat_cool", "auto")
MIN_C, MAX_C, STEP_C = 7.0, 35.0, 0.5


def initial_reported() -> JSON:
    return {"hvac_mode": "off", "hvac_action": "off"}


def validate(command: str, params: JSON) -> JSON:
    if command == "set_hvac_mode":
        if set(params) != {"mode"} or params["mode"] not in MODES:
            raise CommandInvalid("invalid_params", f"set_hvac_mode takes {{mode}}, one of {', '.join(MODES)}")
        return {"mode": params["mode"]}
    if command == "set_target_temperature":
        if set(params) == {"target_c"}:
            return {"target_c": _temperature(params, "target_c")}
        if set(params) == {"target_low_c", "target_high_c"}:
            low, high = _temperature(params, "target_low_c"), _temperature(params, "target_high_c")
            if low >= high:
                raise CommandInvalid(
                    "invalid_params", f"target_low_c {low} is not below target_high_c {high}"
                )
            return {"target_low_c": low, "target_high_c": high}
        raise CommandInvalid(
            "invalid_params", "set_target_temperature takes {target_c} or {target_low_c, target_high_c}"
        )
    raise CommandInvalid("unknown_command", f"a thermostat has no command {command!r}")


def _temperature(params: JSON, key: str) -> float:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CommandInvalid("invalid_params", f"{key} must be a number, not {value!r}")
    if not MIN_C <= value <= MAX_C:
        raise CommandInvalid("out_of_range", f"{key} {value} is outside {MIN_C}-{MAX_C}")
    if not (value / STEP_C).is_integer():
        raise CommandInvalid("invalid_step", f"{key} {value} is not a multiple of {STEP_C}")
    return float(value)


def plan(twin: Twin, command: str, params: JSON) -> tuple[str, JSON]:
    if command == "set_hvac_mode":
        return "hvac_mode", {"hvac_mode": params["mode"]}
    mode = twin.desired.get("hvac_mode", twin.reported.get("hvac_mode"))
    if "target_c" in params and mode == "heat_cool":
        raise CommandInvalid("wrong_mode", "in heat_cool mode, set target_low_c and target_high_c")
    if "target_low_c" in params and mode not in PAIR_MODES:
        raise CommandInvalid("wrong_mode", f"target_low_c/target_high_c need heat_cool or auto, not {mode}")
    return "target", dict(params)


def converged(desired: JSON, reported: JSON) -> bool:
    return same_as_reported(desired, reported)


def failure(reported: JSON) -> str | None:
    return None
