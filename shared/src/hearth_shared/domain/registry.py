"""Every device type Hearth knows. Adding a type: write its module, and name it here (the import and
``_TYPE_MODULES``).

A command every type shares (an admin command such as ``reboot``) is declared once, in
``device_type.SHARED_COMMANDS`` with ``admin=True``; a type lists only its own commands.
"""

from __future__ import annotations

import json
from types import ModuleType

from hearth_shared.domain import light, lock, thermostat
from hearth_shared.domain.device_type import CommandInvalid, DeviceType, StateCount, StateKey, StateMinutes
from hearth_shared.schema.events import JSON

# One entry per type: the module hearth_shared.domain.<name>, whose ``TYPE`` is named <name>. Imported,
# not looked up by name, so the import contracts see that the registry sits above every type module.
_TYPE_MODULES: tuple[ModuleType, ...] = (thermostat, lock, light)


def _load(module: ModuleType) -> DeviceType:
    kind = module.TYPE
    module_name = module.__name__.rpartition(".")[2]
    if not isinstance(kind, DeviceType) or kind.name != module_name:
        raise TypeError(f"{module.__name__}.TYPE must be the DeviceType {module_name!r}")
    return kind


DEVICE_TYPES: dict[str, DeviceType] = {kind.name: kind for kind in map(_load, _TYPE_MODULES)}


def device_type_names() -> list[str]:
    return list(DEVICE_TYPES)


def validate_command(device_type: str, name: str, params: JSON) -> JSON:
    """Normalized params, or ``CommandInvalid``: what the HTTP API checks before writing anything."""
    kind = DEVICE_TYPES.get(device_type)
    if kind is None:
        raise CommandInvalid("unknown_device_type", f"no device type {device_type!r}")
    return kind.validate(name, params)


def device_type_schemas() -> list[JSON]:
    """Every type's schema (state keys, commands and their params), as the query API serves them."""
    return [kind.schema() for kind in DEVICE_TYPES.values()]


def commands_description() -> str:
    """Every type's commands and their params, as text for the command API's OpenAPI document."""
    lines = ["Params by device type and command (JSON schema; `GET /v1/device-types` of the query API):"]
    for kind in DEVICE_TYPES.values():
        for command in kind.all_commands:
            admin = " (admin tokens only)" if command.admin else ""
            lines.append(f"- `{kind.name}` `{command.name}`{admin}: `{json.dumps(command.params_schema())}`")
    return "\n".join(lines)


def rollup_keys() -> tuple[StateKey, ...]:
    """The numeric telemetry keys the analytics roll up (``StateKey.rollup``), over every type, each name
    once (the first type's declaration: its unit labels the analytics' charts)."""
    keys: dict[str, StateKey] = {}
    for kind in DEVICE_TYPES.values():
        for key in kind.state:
            if key.rollup:
                keys.setdefault(key.name, key)
    return tuple(keys.values())


def rollup_metrics() -> tuple[str, ...]:
    """The names of ``rollup_keys``."""
    return tuple(k.name for k in rollup_keys())


def state_minutes() -> tuple[StateMinutes, ...]:
    """The minutes-in-a-state figures the analytics roll up, over every type, in the types' order."""
    return tuple(m for t in DEVICE_TYPES.values() for m in t.minutes)


def state_counts() -> tuple[StateCount, ...]:
    """The state-count figures the analytics roll up, over every type, in the types' order."""
    return tuple(c for t in DEVICE_TYPES.values() for c in t.counts)


def counted_state_keys() -> tuple[str, ...]:
    """The reported text keys that minutes and counts are figured from, over every type, each once."""
    return tuple(dict.fromkeys([*(m.key for m in state_minutes()), *(c.key for c in state_counts())]))


def scored_keys(device_type: str) -> tuple[StateKey, ...]:
    """The keys of a type's readings the device actor scores against the anomaly model."""
    kind = DEVICE_TYPES.get(device_type)
    return tuple(k for k in kind.state if k.baseline is not None) if kind else ()


def scored_metrics(device_type: str) -> tuple[str, ...]:
    """The names of ``scored_keys``."""
    return tuple(k.name for k in scored_keys(device_type))


def reported_matches(device_type: str, key: str, desired: object, reported: JSON) -> bool:
    """Whether ``reported`` holds ``key`` at ``desired`` within the type's tolerance (exact if unknown)."""
    kind = DEVICE_TYPES.get(device_type)
    if kind is None:
        return key in reported and bool(reported[key] == desired)
    return kind.matches(key, desired, reported)
