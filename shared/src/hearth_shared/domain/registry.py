"""Every device type Hearth knows. Adding a type: write its module, add one line here."""

from __future__ import annotations

from hearth_shared.domain import lock, thermostat
from hearth_shared.domain.device_type import CommandInvalid, DeviceType
from hearth_shared.events import JSON

DEVICE_TYPES: dict[str, DeviceType] = {
    thermostat.name: thermostat,
    lock.name: lock,
}


def device_type_names() -> list[str]:
    return list(DEVICE_TYPES)


def validate_command(device_type: str, name: str, params: JSON) -> JSON:
    """Normalized params, or ``CommandInvalid``: what the HTTP API checks before writing anything."""
    kind = DEVICE_TYPES.get(device_type)
    if kind is None:
        raise CommandInvalid("unknown_device_type", f"no device type {device_type!r}")
    return kind.validate(name, params)
