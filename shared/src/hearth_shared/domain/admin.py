"""Device administration, for every device type: admin commands and quarantine.

* Admin commands (``ADMIN_COMMANDS``): ``reboot`` {} and ``update_firmware`` {version, url, sha256}. Any
  type takes them; only an admin token may send them (the command API answers 403 to a home token: the
  actor trusts the inbox, which only the platform writes). ``update_firmware`` desires
  ``firmware_version`` and converges when the device reports it; ``reboot`` desires nothing and
  converges once the device acknowledges it.
* Quarantine: ``QuarantineDevice`` records ``device.quarantined`` {reason, since}, ``ReleaseDevice``
  ``device.released``. While quarantined a device rejects every non-admin command with reason
  ``quarantined`` (admin commands still go through: a quarantined device can be rebooted or repaired by
  firmware), and a non-admin command held for it (accepted, not yet dispatched) fails as ``quarantined``
  when the quarantine starts, so nothing a home asked reaches it afterwards. A repeated quarantine (a
  redelivered request) or a release without a quarantine changes nothing.

Pure: no I/O; ``decide`` (decide.py) calls in here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from hearth_shared.domain.change import Change
from hearth_shared.domain.device_type import CommandInvalid
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import (
    JSON,
    CommandFailed,
    CommandFailedPayload,
    DeviceFirmwareUpdateRequested,
    DeviceQuarantined,
    DeviceRebootRequested,
    DeviceReleased,
    Event,
    QuarantineDevice,
    QuarantinedPayload,
    ReleaseDevice,
    ReleasedPayload,
)
from hearth_shared.schema.ids import IDENTIFIER_PATTERN, has_control_characters, is_identifier

# Each admin command's setting (its supersede group) and the fact that records what it desires.
ADMIN_SETTINGS: Mapping[str, type[Event]] = {
    "reboot": DeviceRebootRequested,
    "firmware": DeviceFirmwareUpdateRequested,
}
ADMIN_COMMANDS: Mapping[str, str] = {"reboot": "reboot", "update_firmware": "firmware"}  # command -> setting
QUARANTINED = "quarantined"
FIRMWARE_KEY = "firmware_version"
MAX_URL_LENGTH = 2048
MAX_REASON_LENGTH = 500
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def is_admin_command(name: str) -> bool:
    return name in ADMIN_COMMANDS


def validate_admin(command: str, params: JSON) -> JSON:
    """Normalized params of an admin command, or ``CommandInvalid`` (the HTTP API answers 422 with it)."""
    if command == "reboot":
        if params:
            raise CommandInvalid("invalid_params", "reboot takes no params")
        return {}
    if command != "update_firmware":
        raise CommandInvalid("unknown_command", f"no admin command {command!r}")
    return validate_firmware(params.get("version"), params.get("url"), params.get("sha256"), extra=params)


def validate_firmware(version: object, url: object, sha256: object, *, extra: JSON | None = None) -> JSON:
    """A firmware image as a device is told to install it: ``{version, url, sha256}`` (also used by
    campaigns when they register a firmware)."""
    unknown = sorted(set(extra or {}) - {"version", "url", "sha256"})
    if unknown:
        raise CommandInvalid("invalid_params", f"update_firmware takes version, url, sha256; not {unknown}")
    if not is_identifier(version):
        raise CommandInvalid(
            "invalid_version", "version: letters, digits and . _ : - (at most 64), e.g. 2.4.1"
        )
    if not (
        isinstance(url, str)
        and url.startswith(("https://", "http://"))
        and len(url) <= MAX_URL_LENGTH
        and not has_control_characters(url)
        and " " not in url
    ):
        raise CommandInvalid("invalid_url", f"url: an http(s) URL of at most {MAX_URL_LENGTH} characters")
    if not isinstance(sha256, str) or _SHA256.fullmatch(sha256.lower()) is None:
        raise CommandInvalid("invalid_sha256", "sha256: the image's SHA-256 as 64 hexadecimal digits")
    return {"version": version, "url": url, "sha256": sha256.lower()}


def admin_command_schemas() -> JSON:
    """The admin commands as ``GET /v1/device-types`` describes a type's commands (label, description,
    params as JSON schema), for every type alike; ``validate_admin`` is what checks them."""
    text: JSON = {"type": "string"}
    firmware: JSON = {
        "version": {**text, "pattern": IDENTIFIER_PATTERN},
        "url": {**text, "format": "uri", "maxLength": MAX_URL_LENGTH},
        "sha256": {**text, "pattern": _SHA256.pattern},
    }
    schemas: JSON = {
        "reboot": ("Reboot", "Restart the device", {}),
        "update_firmware": ("Update firmware", "Install this image and report its version", firmware),
    }
    return {
        name: {
            "label": label,
            "description": description,
            "admin": True,
            "params": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        }
        for name, (label, description, properties) in schemas.items()
    }


def plan_admin(command: str, params: JSON) -> tuple[str, JSON]:
    """``(setting, desired keys)`` of a validated admin command."""
    if command == "update_firmware":
        return ADMIN_COMMANDS[command], {FIRMWARE_KEY: params["version"]}
    return ADMIN_COMMANDS[command], {}


def admin_converged(desired: JSON, reported: JSON) -> bool:
    """Every desired key (``firmware_version``) reported with the same value; ``reboot`` desires nothing
    and converges on the device's ack."""
    return all(key in reported and reported[key] == value for key, value in desired.items())


def refusal(twin: Twin, command: str) -> CommandInvalid | None:
    """Why the device refuses ``command`` whatever its params (quarantine), or None."""
    if twin.quarantine is not None and not is_admin_command(command):
        return CommandInvalid(QUARANTINED, f"the device is quarantined ({twin.quarantine.reason})")
    return None


def quarantine_changes(twin: Twin, request: QuarantineDevice | ReleaseDevice, now: datetime) -> list[Change]:
    """The facts of a quarantine or release request; the held non-admin commands fail as ``quarantined``."""
    if isinstance(request, ReleaseDevice):
        if twin.quarantine is None:
            return []
        return [Change(DeviceReleased, ReleasedPayload(reason=twin.quarantine.reason))]
    if twin.quarantine is not None:
        return []
    changes = [Change(DeviceQuarantined, QuarantinedPayload(reason=request.reason, since=now))]
    for held in twin.commands.values():
        if held.status in ("pending", "accepted") and not is_admin_command(held.name):
            failed = CommandFailedPayload(
                command_id=held.command_id, reason=QUARANTINED, message="the device was quarantined"
            )
            changes.append(Change(CommandFailed, failed, correlation_id=held.command_id))
    return changes
