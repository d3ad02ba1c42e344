"""Simulated firmware: every simulated device runs a firmware version, installs ``update_firmware`` and
obeys ``reboot``, with switchable failure modes per firmware version (``FirmwareOptions.faults``):

* ``bad_checksum``: the image does not match its sha256; the device refuses it (ack ``failed``,
  ``checksum_mismatch``) and keeps its firmware;
* ``never_returns``: the device acknowledges, reboots into the new image and is never heard again;
* ``drifts``: the device comes back on the new version, but a thermostat's reading drifts from then on
  (``drift_c_per_h``; the anomaly model notices), and a lock's battery reading falls.

An install takes ``install_s``: the device is silent meanwhile (rebooting), then reports its new
``firmware_version``. ``reboot`` is the same without a new version. Pure and clock-free like the models:
``Firmware.command`` returns the ack and what to do with the device, the fleet (fleet.py) carries it out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from hearth_shared.domain.admin import FIRMWARE_KEY, is_admin_command

FirmwareFault = Literal["bad_checksum", "never_returns", "drifts"]
FAULTS: tuple[FirmwareFault, ...] = ("bad_checksum", "never_returns", "drifts")


@dataclass(frozen=True)
class FirmwareOptions:
    initial_version: str = "1.0.0"
    install_s: float = 2.0
    faults: Mapping[str, FirmwareFault] = field(default_factory=dict)  # firmware version -> failure mode
    drift_c_per_h: float = 40.0  # how fast a drifting thermostat drifts (fast: a campaign's soak is short)

    @staticmethod
    def parse_faults(text: str) -> dict[str, FirmwareFault]:
        """``"6.6.6=bad_checksum,7.0.0=drifts"`` -> ``{"6.6.6": "bad_checksum", "7.0.0": "drifts"}``."""
        faults: dict[str, FirmwareFault] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            version, _, fault = part.partition("=")
            if fault not in FAULTS:
                raise ValueError(f"{part!r}: a fault is one of {', '.join(FAULTS)}")
            faults[version.strip()] = fault
        return faults


@dataclass(frozen=True)
class FirmwareOutcome:
    """What a device does with an admin command: its ack, how long it is silent, what it runs after."""

    ok: bool
    reason: str = ""
    silent_s: float = 0.0  # math.inf: never heard again
    version: str | None = None  # the firmware it runs once back (None: unchanged)
    drifts: bool = False


@dataclass
class DeviceFirmware:
    """One device's firmware (the hub copies ``version`` into the model, whose reports say it)."""

    version: str
    drifting: bool = False

    def restore(self, reported: Mapping[str, object]) -> None:
        version = reported.get(FIRMWARE_KEY)
        if isinstance(version, str):
            self.version = version


def handles(command_name: str) -> bool:
    return is_admin_command(command_name)


def command(options: FirmwareOptions, name: str, params: Mapping[str, object]) -> FirmwareOutcome:
    """The outcome of ``reboot`` or ``update_firmware`` on a simulated device."""
    if name == "reboot":
        return FirmwareOutcome(ok=True, silent_s=options.install_s / 2)
    version = params.get("version")
    if not isinstance(version, str):
        return FirmwareOutcome(ok=False, reason="invalid_params")
    fault = options.faults.get(version)
    if fault == "bad_checksum":
        return FirmwareOutcome(ok=False, reason="checksum_mismatch")
    if fault == "never_returns":
        return FirmwareOutcome(ok=True, silent_s=math.inf, version=version)
    return FirmwareOutcome(ok=True, silent_s=options.install_s, version=version, drifts=fault == "drifts")


def apply(firmware: DeviceFirmware, outcome: FirmwareOutcome) -> None:
    """The device after the outcome (its model reports the new version once it is back)."""
    if outcome.version is not None:
        firmware.version = outcome.version
        firmware.drifting = outcome.drifts
