"""The requests on the inbox topic: the command API and the devices write them, the device actor decides
what they mean and records facts. A request is not a fact yet: a command is ``pending`` from the moment
its request is in the inbox until the actor decides on it (``hearth_shared.schema.events`` decodes them).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Union

from hearth_shared.schema.record_envelope import JSON, Inbound
from hearth_shared.schema.shards import DEFAULT_SHARD


class RegisterDevice(Inbound, frozen=True, kw_only=True, tag="register_device"):
    home_id: str
    device_type: str
    name: str
    simulated: bool = False
    shard: str = DEFAULT_SHARD  # the MQTT broker shard the command API picked (hearth_shared.schema.shards)


class SubmitCommand(Inbound, frozen=True, kw_only=True, tag="submit_command"):
    home_id: str
    command_id: uuid.UUID
    name: str
    params: JSON
    expires_at: datetime


class ReportState(Inbound, frozen=True, kw_only=True, tag="report_state"):
    """A device's state report or telemetry reading, stamped with its own clock and sequence."""

    device_seq: int
    device_time: datetime
    state: JSON


class AcknowledgeCommand(Inbound, frozen=True, kw_only=True, tag="ack_command"):
    command_id: uuid.UUID
    ok: bool
    reason: str = ""
    message: str = ""


class ReportAvailability(Inbound, frozen=True, kw_only=True, tag="report_availability"):
    """A device's MQTT ``availability``: ``online`` when it connects, ``offline`` as its will (the broker
    publishes it when the connection drops), so the device goes offline at once, not after the silence
    timeout. Repeating it changes nothing (the twin is already in that state)."""

    online: bool


class IssueCredentials(Inbound, frozen=True, kw_only=True, tag="issue_credentials"):
    """Give the device a new MQTT secret (its hash only); a credential it had is revoked as ``rotated``.
    ``credential_id`` makes a redelivered request harmless."""

    credential_id: uuid.UUID
    password_hash: str


class RevokeCredentials(Inbound, frozen=True, kw_only=True, tag="revoke_credentials"):
    """The device's MQTT credential stops working (nothing happens if it has none)."""


class MoveDeviceShard(Inbound, frozen=True, kw_only=True, tag="move_device_shard"):
    """An operator moves the device to another MQTT broker shard (nothing happens if it is there)."""

    shard: str


class RecordCredentialsLoaded(Inbound, frozen=True, kw_only=True, tag="record_credentials_loaded"):
    """The broker-access follower of ``shard`` says its broker has loaded the credential: the device can
    connect with it from now on (hearth_device_gateway.broker_access)."""

    credential_id: uuid.UUID
    shard: str


class QuarantineDevice(Inbound, frozen=True, kw_only=True, tag="quarantine_device"):
    """An admin takes the device out of service: it refuses every non-admin command until released."""

    reason: str


class ReleaseDevice(Inbound, frozen=True, kw_only=True, tag="release_device"):
    """An admin ends the device's quarantine (nothing happens if it has none)."""


INBOUND_TYPES: tuple[type[Inbound], ...] = (
    RegisterDevice,
    SubmitCommand,
    ReportState,
    AcknowledgeCommand,
    ReportAvailability,
    IssueCredentials,
    RevokeCredentials,
    QuarantineDevice,
    ReleaseDevice,
    MoveDeviceShard,
    RecordCredentialsLoaded,
)
AnyInbound = Union[INBOUND_TYPES]  # type: ignore[valid-type]  # noqa: UP007
