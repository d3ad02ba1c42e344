"""Administration facts (``hearth_shared.domain.admin``): admin commands record what they desire like a
type's settings do; quarantine and release are facts of their own (``hearth_shared.schema.events`` gathers
every fact family)."""

from __future__ import annotations

from datetime import datetime

from hearth_shared.schema.device_facts import DesiredSetPayload
from hearth_shared.schema.record_envelope import Event, Payload


class QuarantinedPayload(Payload, frozen=True, kw_only=True):
    """Why an admin quarantined the device, and since when (the platform's clock)."""

    reason: str
    since: datetime


class ReleasedPayload(Payload, frozen=True, kw_only=True):
    """The quarantine ended; ``reason`` is the one it had."""

    reason: str


class DeviceRebootRequested(Event, frozen=True, kw_only=True, tag="device.reboot_requested"):
    payload: DesiredSetPayload


class DeviceFirmwareUpdateRequested(Event, frozen=True, kw_only=True, tag="device.firmware_update_requested"):
    payload: DesiredSetPayload


class DeviceQuarantined(Event, frozen=True, kw_only=True, tag="device.quarantined"):
    payload: QuarantinedPayload


class DeviceReleased(Event, frozen=True, kw_only=True, tag="device.released"):
    payload: ReleasedPayload
