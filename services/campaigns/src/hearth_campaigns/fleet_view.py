"""``FleetView``: what the campaign driver knows about the devices, folded from the device journal.

Per device: home, type, online, the ``firmware_version`` it last reported, its recent anomaly facts and
how its homes' own commands recently ended (converged or not: the convergence gate). Per admin command
(``update_firmware``, ``reboot``: the campaign's commands and rollbacks): its last status and reason.
The driver reads the journal from its first offset at start, so the view needs no storage of its own;
``sight()`` hands the pure decisions an immutable ``FleetSight``.

Only the facts named in ``FACTS`` are decoded; everything else (most of the journal: telemetry without a
firmware key) is skipped by a substring test first.
"""

from __future__ import annotations

import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime

from hearth_shared.domain.admin import FIRMWARE_KEY, is_admin_command
from hearth_shared.domain.campaign_gates import CommandOutcome, CommandSight, DeviceSight, FleetSight
from hearth_shared.events import (
    COMMAND_STATUS_BY_EVENT,
    AnomalyDetected,
    CommandFailed,
    CommandRejected,
    CommandRequested,
    DeviceCameOnline,
    DeviceRegistered,
    DeviceWentOffline,
    Event,
    StateReported,
    wire_name,
)

KEPT = 64  # anomalies and command outcomes kept per device
_FACT_TYPES: list[type[Event]] = [DeviceRegistered, DeviceCameOnline, DeviceWentOffline, AnomalyDetected]
_FACT_TYPES += COMMAND_STATUS_BY_EVENT.keys()
FACTS = frozenset(wire_name(t) for t in _FACT_TYPES)
_FIRMWARE = FIRMWARE_KEY.encode()
_REPORTED = wire_name(StateReported)


@dataclass(slots=True)
class _Device:
    home_id: str
    device_type: str
    online: bool = False
    firmware_version: str | None = None
    anomalies: deque[datetime] = field(default_factory=lambda: deque(maxlen=KEPT))
    outcomes: deque[CommandOutcome] = field(default_factory=lambda: deque(maxlen=KEPT))


class FleetView:
    def __init__(self) -> None:
        self.devices: dict[str, _Device] = {}
        self.admin_commands: dict[uuid.UUID, CommandSight] = {}
        self._home_commands: set[uuid.UUID] = set()  # non-admin commands under way

    @staticmethod
    def wants(wire_type: str, value: bytes) -> bool:
        """Whether a fact of this wire type must be decoded (a state report only if it has firmware)."""
        return wire_type in FACTS or (wire_type == _REPORTED and _FIRMWARE in value)

    def apply(self, event: Event) -> None:
        if isinstance(event, DeviceRegistered):
            self.devices.setdefault(event.device_id, _Device(event.home_id, event.payload.device_type))
            return
        device = self.devices.get(event.device_id)
        if device is None:
            return
        if isinstance(event, StateReported):
            version = event.payload.reported.get(FIRMWARE_KEY)
            if isinstance(version, str):
                device.firmware_version = version
        elif isinstance(event, DeviceCameOnline | DeviceWentOffline):
            device.online = isinstance(event, DeviceCameOnline)
        elif isinstance(event, AnomalyDetected):
            device.anomalies.append(event.recorded_at)
        else:
            self._command(device, event)

    def _command(self, device: _Device, event: Event) -> None:
        status = COMMAND_STATUS_BY_EVENT.get(type(event))
        command_id = event.correlation_id
        if status is None or command_id is None:
            return
        if isinstance(event, CommandRequested) and not is_admin_command(event.payload.name):
            self._home_commands.add(command_id)
            return
        if command_id in self._home_commands:
            if status in ("converged", "failed", "expired"):
                device.outcomes.append(CommandOutcome(at=event.recorded_at, converged=status == "converged"))
            if status in ("converged", "failed", "expired", "rejected", "superseded"):
                self._home_commands.discard(command_id)
            return
        reason = event.payload.reason if isinstance(event, CommandFailed | CommandRejected) else ""
        self.admin_commands[command_id] = CommandSight(status=status, reason=reason, at=event.recorded_at)

    def sight(self) -> FleetSight:
        devices = {
            device_id: DeviceSight(
                device_id=device_id,
                home_id=d.home_id,
                device_type=d.device_type,
                online=d.online,
                firmware_version=d.firmware_version,
                anomalies=tuple(d.anomalies),
                outcomes=tuple(d.outcomes),
            )
            for device_id, d in self.devices.items()
        }
        return FleetSight(devices=devices, commands=dict(self.admin_commands))
