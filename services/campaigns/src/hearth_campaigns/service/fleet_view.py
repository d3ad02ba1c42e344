"""``FleetView``: what the campaign driver knows about the devices, folded from the device journal.

Per device: home, type, online, the ``firmware_version`` it last reported, its recent anomaly facts and
how its homes' own commands recently ended (converged or not: the convergence gate). Per admin command
(``update_firmware``, ``reboot``: the campaign's commands and rollbacks): its last status and reason.
``sight()`` hands the pure decisions an immutable ``FleetSight``.

Only the facts named in ``FACTS`` are decoded; everything else (most of the journal: telemetry without a
firmware key) is skipped by a substring test first.

Bounded by the fleet, not by the journal's age:

* per device at most ``KEPT`` anomalies and command outcomes, and none older than the campaigns under
  way need (``forget_evidence_before(evidence_since(...))``, every ``FORGET_EVERY`` of the driver's
  clock): a wave's gates read only what came after it began, so with no campaign running the view holds
  the last minutes' evidence only;
* the homes' commands under way are forgotten when they end (converged, failed, expired, rejected,
  superseded: every command ends by its deadline, at most a day, as the actor decides), and any still
  there ``HOME_COMMAND_WINDOW`` after it was requested (by the journal's clock: an end that never came)
  is dropped too, so a lost end leaks nothing;
* admin commands' statuses are kept only while a campaign waits on them: the driver calls
  ``keep_commands`` with the commands its campaigns still follow (``awaited_commands``) every tick, so a
  finished campaign's ten thousand commands, or an operator's reboot, leave memory within a tick.

The driver restarts from a snapshot of this view (``snapshot``/``restore``: a ``FleetViewSnapshot``, a
format number and the state as msgpack, readable across releases: after a retention window it may be
all that is left of a device's registration), not from the journal's first offset.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import msgspec

from hearth_shared.domain.admin import FIRMWARE_KEY, is_admin_command
from hearth_shared.domain.campaign_gates import CommandOutcome, CommandSight, DeviceSight, FleetSight
from hearth_shared.schema.events import (
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
from hearth_shared.schema.snapshot_format import SnapshotCodec

KEPT = 64  # anomalies and command outcomes kept per device
# A home's command not ended this long after its request never will be (deadlines are at most a day).
HOME_COMMAND_WINDOW = timedelta(days=2)
_FACT_TYPES: list[type[Event]] = [DeviceRegistered, DeviceCameOnline, DeviceWentOffline, AnomalyDetected]
_FACT_TYPES += COMMAND_STATUS_BY_EVENT.keys()
FACTS = frozenset(wire_name(t) for t in _FACT_TYPES)
_FIRMWARE = FIRMWARE_KEY.encode()
_REPORTED = wire_name(StateReported)
_HOME_COMMAND_ENDS = frozenset({"converged", "failed", "expired", "rejected", "superseded"})


@dataclass(slots=True)
class _Device:
    home_id: str
    device_type: str
    online: bool = False
    firmware_version: str | None = None
    anomalies: deque[datetime] = field(default_factory=lambda: deque(maxlen=KEPT))
    outcomes: deque[CommandOutcome] = field(default_factory=lambda: deque(maxlen=KEPT))


# ------------------------------------------------------------------------------------ snapshot format

FLEET_VIEW_FORMAT = 1


class SavedOutcome(msgspec.Struct, frozen=True, array_like=True):
    at: datetime
    converged: bool


class SavedDevice(msgspec.Struct, frozen=True, kw_only=True):
    device_id: str
    home_id: str
    device_type: str
    online: bool
    firmware_version: str | None
    anomalies: list[datetime]  # oldest first
    outcomes: list[SavedOutcome]  # oldest first


class SavedCommand(msgspec.Struct, frozen=True, kw_only=True):
    command_id: uuid.UUID
    status: str
    reason: str
    at: datetime


class SavedHomeCommand(msgspec.Struct, frozen=True, array_like=True):
    command_id: uuid.UUID
    requested_at: datetime


class FleetViewSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    format: int = FLEET_VIEW_FORMAT
    devices: list[SavedDevice]
    admin_commands: list[SavedCommand]
    home_commands: list[SavedHomeCommand]  # in the order they were requested


_CODEC = SnapshotCodec("fleet view", FleetViewSnapshot, FLEET_VIEW_FORMAT)


class FleetView:
    def __init__(self) -> None:
        self.devices: dict[str, _Device] = {}
        self.admin_commands: dict[uuid.UUID, CommandSight] = {}
        # non-admin commands under way, with when they were requested, oldest first
        self._home_commands: dict[uuid.UUID, datetime] = {}

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
            self._forget_home_commands_before(event.recorded_at - HOME_COMMAND_WINDOW)
            self._home_commands[command_id] = event.recorded_at
            return
        if command_id in self._home_commands:
            if status in ("converged", "failed", "expired"):
                device.outcomes.append(CommandOutcome(at=event.recorded_at, converged=status == "converged"))
            if status in _HOME_COMMAND_ENDS:
                del self._home_commands[command_id]
            return
        reason = event.payload.reason if isinstance(event, CommandFailed | CommandRejected) else ""
        self.admin_commands[command_id] = CommandSight(status=status, reason=reason, at=event.recorded_at)

    def _forget_home_commands_before(self, cutoff: datetime) -> None:
        """Drop the oldest commands under way requested before ``cutoff``: their end never came."""
        pending = self._home_commands
        while pending:
            oldest = next(iter(pending))
            if pending[oldest] >= cutoff:
                return
            del pending[oldest]

    def forget_evidence_before(self, cutoff: datetime) -> None:
        """Drop each device's anomalies and command outcomes older than ``cutoff`` (``evidence_since``:
        no gate reads them again)."""
        for device in self.devices.values():
            while device.anomalies and device.anomalies[0] < cutoff:
                device.anomalies.popleft()
            while device.outcomes and device.outcomes[0].at < cutoff:
                device.outcomes.popleft()

    def keep_commands(self, awaited: Iterable[uuid.UUID]) -> None:
        """Forget every admin command's status but those of ``awaited`` (what campaigns still follow)."""
        kept = {c: self.admin_commands[c] for c in awaited if c in self.admin_commands}
        if len(kept) < len(self.admin_commands):
            self.admin_commands = kept

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

    # ------------------------------------------------------------------------------------ snapshot

    def snapshot(self) -> bytes:
        return _CODEC.encode(
            FleetViewSnapshot(
                devices=[
                    SavedDevice(
                        device_id=device_id,
                        home_id=d.home_id,
                        device_type=d.device_type,
                        online=d.online,
                        firmware_version=d.firmware_version,
                        anomalies=list(d.anomalies),
                        outcomes=[SavedOutcome(o.at, o.converged) for o in d.outcomes],
                    )
                    for device_id, d in self.devices.items()
                ],
                admin_commands=[
                    SavedCommand(command_id=c, status=s.status, reason=s.reason, at=s.at)
                    for c, s in self.admin_commands.items()
                ],
                home_commands=[SavedHomeCommand(c, at) for c, at in self._home_commands.items()],
            )
        )

    @classmethod
    def from_snapshot(cls, data: bytes) -> FleetView:
        """A view with the saved state; raises (``ValueError``, ``msgspec.DecodeError``) if unreadable."""
        saved = _CODEC.decode(data)
        view = cls()
        for d in saved.devices:
            device = view.devices[d.device_id] = _Device(
                d.home_id, d.device_type, d.online, d.firmware_version
            )
            device.anomalies.extend(d.anomalies)
            device.outcomes.extend(CommandOutcome(at=o.at, converged=o.converged) for o in d.outcomes)
        view.admin_commands = {
            c.command_id: CommandSight(status=c.status, reason=c.reason, at=c.at)
            for c in saved.admin_commands
        }
        view._home_commands = {c.command_id: c.requested_at for c in saved.home_commands}
        return view

    def restore(self, data: bytes) -> None:
        """Replace the whole state with the saved one, or raise and leave it as it was."""
        view = FleetView.from_snapshot(data)
        self.devices, self.admin_commands, self._home_commands = (
            view.devices,
            view.admin_commands,
            view._home_commands,
        )
