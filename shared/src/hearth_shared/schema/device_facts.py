"""The device journal's facts about devices and their commands, with their payloads, and the command
statuses those facts move a command through (``hearth_shared.schema.events`` gathers every fact family).

A fact is a frozen msgspec struct under the ``Event`` envelope with a stable wire ``type`` tag; adding
one means adding it to ``EVENT_TYPES`` in ``hearth_shared.schema.events``, or the codec never decodes it
(tests/unit/test_event_families.py fails until it is there).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Literal

from hearth_shared.schema.record_envelope import JSON, Event, Payload, register_upcaster
from hearth_shared.schema.shards import DEFAULT_SHARD


class DeviceRegisteredPayload(Payload, frozen=True, kw_only=True):
    device_type: str
    name: str
    simulated: bool = False  # played by the local stack's simulator hub (facts before it decode as False)
    # Its MQTT broker shard, picked at registration (facts before shards: the one broker there was).
    shard: str = DEFAULT_SHARD


class ShardMovedPayload(Payload, frozen=True, kw_only=True):
    """An operator moved the device from one MQTT broker shard to another."""

    shard: str
    from_shard: str


class CredentialsLoadedPayload(Payload, frozen=True, kw_only=True):
    """The broker of ``shard`` has loaded the credential: the device can connect with it."""

    credential_id: uuid.UUID
    shard: str


class CommandRequestedPayload(Payload, frozen=True, kw_only=True):
    command_id: uuid.UUID
    name: str
    params: JSON
    expires_at: datetime


class CommandRef(Payload, frozen=True, kw_only=True):
    command_id: uuid.UUID


class CommandRejectedPayload(Payload, frozen=True, kw_only=True):
    command_id: uuid.UUID
    reason: str
    message: str


class CommandFailedPayload(Payload, frozen=True, kw_only=True):
    command_id: uuid.UUID
    reason: str
    message: str = ""


class CommandSupersededPayload(Payload, frozen=True, kw_only=True):
    command_id: uuid.UUID
    superseded_by: uuid.UUID


class DesiredSetPayload(Payload, frozen=True, kw_only=True):
    """The desired keys a command changed (e.g. ``{"target_c": 21.5}``), the command that did, and the
    setting (supersede group) it belongs to ("" in facts written before the field existed: their
    type-specific fact names the setting)."""

    command_id: uuid.UUID
    desired: JSON
    setting: str = ""


class StateReportedPayload(Payload, frozen=True, kw_only=True, omit_defaults=True):
    """What the device said about itself: the reported keys that changed, with its own clock and seq.

    ``unchanged``: the keys it reported at the value the twin already had. They are named because a
    report that reaches Hearth after a newer one records the keys no newer report carried (the twin's
    ``older_key_seqs``), and a key carried at an unchanged value was carried all the same. Left out of the
    record when empty (a device that reports what changed never has any), so such facts are as before.
    A fact written before the field existed reads as having none."""

    reported: JSON
    device_seq: int
    device_time: datetime
    unchanged: tuple[str, ...] = ()


class CredentialsIssuedPayload(Payload, frozen=True, kw_only=True):
    """A device's MQTT secret, as its salted hash only (``hearth_shared.schema.credentials``: Mosquitto's
    ``$7$`` PBKDF2-SHA512 format, the very string the broker checks). The plaintext is never in the
    journal."""

    credential_id: uuid.UUID
    password_hash: str
    issued_at: datetime


class CredentialsRevokedPayload(Payload, frozen=True, kw_only=True):
    """The credential stops working; ``reason`` is ``revoked`` (DELETE) or ``rotated`` (a new one issued)."""

    credential_id: uuid.UUID
    reason: str


class ConnectivityPayload(Payload, frozen=True, kw_only=True):
    last_seen: datetime | None


class AnomalyDetectedPayload(Payload, frozen=True, kw_only=True):
    metric: str
    value: float
    score: float
    threshold: float
    model_version: int
    device_time: datetime


class DeviceRegistered(Event, frozen=True, kw_only=True, tag="device.registered"):
    payload: DeviceRegisteredPayload


class CommandRequested(Event, frozen=True, kw_only=True, tag="command.requested"):
    """The actor took the command from the inbox: status ``pending``."""

    payload: CommandRequestedPayload


class CommandAccepted(Event, frozen=True, kw_only=True, tag="command.accepted"):
    payload: CommandRef


class CommandRejected(Event, frozen=True, kw_only=True, tag="command.rejected"):
    payload: CommandRejectedPayload


class CommandDispatched(Event, frozen=True, kw_only=True, tag="command.dispatched"):
    payload: CommandRef


class CommandAcknowledged(Event, frozen=True, kw_only=True, tag="command.acknowledged"):
    payload: CommandRef


class CommandConverged(Event, frozen=True, kw_only=True, tag="command.converged"):
    payload: CommandRef


class CommandFailed(Event, frozen=True, kw_only=True, tag="command.failed"):
    payload: CommandFailedPayload


class CommandExpired(Event, frozen=True, kw_only=True, tag="command.expired"):
    payload: CommandRef


class CommandSuperseded(Event, frozen=True, kw_only=True, tag="command.superseded"):
    payload: CommandSupersededPayload


class DesiredStateSet(Event, frozen=True, kw_only=True, tag="device.desired_set"):
    """A command's desired keys, for any device type (the payload names the setting): a type declares
    its settings in its module and needs no fact of its own here. Thermostats and locks had facts of their
    own before it, which journals still hold: they are read as this one (``RETIRED_SETTING_FACTS``)."""

    payload: DesiredSetPayload


# Retired facts: before ``device.desired_set``, thermostats and locks recorded a command's desired keys
# with facts of their own, by wire type -> the setting each recorded. Journals still hold them and a fact
# is never rewritten, so each is upcast when read (``RecordCodec``'s decode path, the slow one) into the
# ``device.desired_set`` it means, with its setting named (older records left the payload's setting
# empty: their type said it); nothing writes them any more. Automations triggered by these names keep
# firing on the generic fact of that setting (``hearth_shared.domain.automation.fact_names``), and the
# read models keep their history rows under the name on the wire (``RETIRED_INTO``). The list never
# grows: a new type records its settings with ``device.desired_set`` from the start.
RETIRED_SETTING_FACTS: Mapping[str, str] = {
    "thermostat.target_set": "target",
    "thermostat.hvac_mode_set": "hvac_mode",
    "lock.desired_state_set": "lock",
}
# The facts retired ones are upcast into: a record of one may carry a retired name on the wire.
RETIRED_INTO: frozenset[type[Event]] = frozenset({DesiredStateSet})


def _read_retired_setting_fact(raw: JSON) -> JSON:
    """A retired setting fact as the ``device.desired_set`` it means (envelope and ids unchanged)."""
    payload = raw.get("payload")
    if isinstance(payload, dict) and not payload.get("setting"):
        payload = {**payload, "setting": RETIRED_SETTING_FACTS[raw["type"]]}
    generic = {"type": "device.desired_set", "schema_version": DesiredStateSet.SCHEMA_VERSION}
    return {**raw, **generic, "payload": payload}


for _retired in RETIRED_SETTING_FACTS:
    register_upcaster(_retired, 1)(_read_retired_setting_fact)


class StateReported(Event, frozen=True, kw_only=True, tag="device.state_reported"):
    payload: StateReportedPayload


class DeviceCredentialsIssued(Event, frozen=True, kw_only=True, tag="device.credentials_issued"):
    payload: CredentialsIssuedPayload


class DeviceCredentialsRevoked(Event, frozen=True, kw_only=True, tag="device.credentials_revoked"):
    payload: CredentialsRevokedPayload


class DeviceShardMoved(Event, frozen=True, kw_only=True, tag="device.shard_moved"):
    payload: ShardMovedPayload


class DeviceCredentialsLoaded(Event, frozen=True, kw_only=True, tag="device.credentials_loaded"):
    payload: CredentialsLoadedPayload


class DeviceWentOffline(Event, frozen=True, kw_only=True, tag="device.went_offline"):
    payload: ConnectivityPayload


class DeviceCameOnline(Event, frozen=True, kw_only=True, tag="device.came_online"):
    payload: ConnectivityPayload


class AnomalyDetected(Event, frozen=True, kw_only=True, tag="anomaly.detected"):
    payload: AnomalyDetectedPayload


# Terminal and intermediate command statuses, by the fact that moves a command into them.
COMMAND_STATUS_BY_EVENT: dict[type[Event], str] = {
    CommandRequested: "pending",
    CommandAccepted: "accepted",
    CommandRejected: "rejected",
    CommandDispatched: "dispatched",
    CommandAcknowledged: "acknowledged",
    CommandConverged: "converged",
    CommandFailed: "failed",
    CommandExpired: "expired",
    CommandSuperseded: "superseded",
}
TERMINAL_STATUSES = frozenset({"rejected", "converged", "failed", "expired", "superseded"})
STATUS_ORDER = ("pending", "accepted", "dispatched", "acknowledged", "converged")


def status_reached(status: str, wanted: str) -> bool:
    """Has a command in ``status`` reached ``wanted``, or ended? (A terminal status ends every wait,
    and a command's status never moves back.)"""
    if status in TERMINAL_STATUSES or status == wanted:
        return True
    if status in STATUS_ORDER and wanted in STATUS_ORDER:
        return STATUS_ORDER.index(status) >= STATUS_ORDER.index(wanted)
    return False


Status = Literal[
    "pending",
    "accepted",
    "rejected",
    "dispatched",
    "acknowledged",
    "converged",
    "failed",
    "expired",
    "superseded",
]
