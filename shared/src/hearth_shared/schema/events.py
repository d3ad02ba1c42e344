"""The one event schema: every record in the journal, and every request on the inbox.

Two record families travel through Kafka, both JSON on the wire:

* **Facts** (``Event`` subclasses) live in the journal topic. Only the device actor writes them: it is
  the single writer per device, so it can number each device's facts ``version`` 1, 2, 3, ... Every
  fact carries the envelope of ../shared/CONTRACT.md and a stable wire ``type``.
* **Requests** (``Inbound`` subclasses) live in the inbox topic. The command API and the devices write
  them; the device actor decides what they mean and records facts. A request is not a fact yet: a
  command is ``pending`` from the moment its request is in the inbox until the actor decides on it.

Both families are frozen msgspec structs joined in tagged unions and decoded by one decoder each, built
once at import. Old ``schema_version``s are upcast on the slow path (``register_upcaster``), and so are
retired facts (``RETIRED_SETTING_FACTS``: the thermostat's and lock's own setting facts, now read as
``device.desired_set``), so every reader sees the journal as facts of today's types.

The records are declared by family, each module one job: ``record_envelope`` (envelopes, payload base,
codec, upcasters), ``device_facts`` (device and command facts, command statuses), ``admin_facts``
(reboot, firmware, quarantine), ``inbox_requests`` (the inbox's requests), ``topic_records`` (device
commands, anomaly models, dead letters). This module gathers them into the two registries and their
codecs, and every importer keeps ``from hearth_shared.schema.events import ...``: the names below are its API.
"""

from __future__ import annotations

from typing import Union

import msgspec

from hearth_shared.schema.admin_facts import (
    DeviceFirmwareUpdateRequested,
    DeviceQuarantined,
    DeviceRebootRequested,
    DeviceReleased,
    QuarantinedPayload,
    ReleasedPayload,
)
from hearth_shared.schema.device_facts import (
    COMMAND_STATUS_BY_EVENT,
    RETIRED_INTO,
    RETIRED_SETTING_FACTS,
    STATUS_ORDER,
    TERMINAL_STATUSES,
    AnomalyDetected,
    AnomalyDetectedPayload,
    CommandAccepted,
    CommandAcknowledged,
    CommandConverged,
    CommandDispatched,
    CommandExpired,
    CommandFailed,
    CommandFailedPayload,
    CommandRef,
    CommandRejected,
    CommandRejectedPayload,
    CommandRequested,
    CommandRequestedPayload,
    CommandSuperseded,
    CommandSupersededPayload,
    ConnectivityPayload,
    CredentialsIssuedPayload,
    CredentialsLoadedPayload,
    CredentialsRevokedPayload,
    DesiredSetPayload,
    DesiredStateSet,
    DeviceCameOnline,
    DeviceCredentialsIssued,
    DeviceCredentialsLoaded,
    DeviceCredentialsRevoked,
    DeviceRegistered,
    DeviceRegisteredPayload,
    DeviceShardMoved,
    DeviceWentOffline,
    ShardMovedPayload,
    StateReported,
    StateReportedPayload,
    Status,
    status_reached,
)
from hearth_shared.schema.inbox_requests import (
    INBOUND_TYPES,
    AcknowledgeCommand,
    AnyInbound,
    IssueCredentials,
    MoveDeviceShard,
    QuarantineDevice,
    RecordCredentialsLoaded,
    RegisterDevice,
    ReleaseDevice,
    ReportAvailability,
    ReportState,
    RevokeCredentials,
    SubmitCommand,
)
from hearth_shared.schema.record_envelope import (
    JSON,
    Event,
    Inbound,
    MalformedRecord,
    Payload,
    RecordCodec,
    Upcaster,
    new_id,
    register_upcaster,
    to_builtins,
    utcnow,
    wire_name,
)
from hearth_shared.schema.topic_records import (
    AnomalyModel,
    Baseline,
    DeadLetter,
    DeviceCommand,
    decode_device_command,
    decode_model,
)

__all__ = [
    "COMMAND_STATUS_BY_EVENT",
    "EVENT_TYPES",
    "INBOUND_TYPES",
    "JSON",
    "RETIRED_INTO",
    "RETIRED_SETTING_FACTS",
    "STATUS_ORDER",
    "TERMINAL_STATUSES",
    "AcknowledgeCommand",
    "AnomalyDetected",
    "AnomalyDetectedPayload",
    "AnomalyModel",
    "AnyEvent",
    "AnyInbound",
    "Baseline",
    "CommandAccepted",
    "CommandAcknowledged",
    "CommandConverged",
    "CommandDispatched",
    "CommandExpired",
    "CommandFailed",
    "CommandFailedPayload",
    "CommandRef",
    "CommandRejected",
    "CommandRejectedPayload",
    "CommandRequested",
    "CommandRequestedPayload",
    "CommandSuperseded",
    "CommandSupersededPayload",
    "ConnectivityPayload",
    "CredentialsIssuedPayload",
    "CredentialsLoadedPayload",
    "CredentialsRevokedPayload",
    "DeadLetter",
    "DesiredSetPayload",
    "DesiredStateSet",
    "DeviceCameOnline",
    "DeviceCommand",
    "DeviceCredentialsIssued",
    "DeviceCredentialsLoaded",
    "DeviceCredentialsRevoked",
    "DeviceFirmwareUpdateRequested",
    "DeviceQuarantined",
    "DeviceRebootRequested",
    "DeviceRegistered",
    "DeviceRegisteredPayload",
    "DeviceReleased",
    "DeviceShardMoved",
    "DeviceWentOffline",
    "Event",
    "Inbound",
    "IssueCredentials",
    "MalformedRecord",
    "MoveDeviceShard",
    "Payload",
    "QuarantineDevice",
    "QuarantinedPayload",
    "RecordCodec",
    "RecordCredentialsLoaded",
    "RegisterDevice",
    "ReleaseDevice",
    "ReleasedPayload",
    "ReportAvailability",
    "ReportState",
    "RevokeCredentials",
    "ShardMovedPayload",
    "StateReported",
    "StateReportedPayload",
    "Status",
    "SubmitCommand",
    "Upcaster",
    "decode_device_command",
    "decode_event",
    "decode_inbound",
    "decode_model",
    "encode",
    "fact_type",
    "new_id",
    "register_upcaster",
    "status_reached",
    "to_builtins",
    "utcnow",
    "wire_name",
]

EVENT_TYPES: tuple[type[Event], ...] = (
    DeviceRegistered,
    CommandRequested,
    CommandAccepted,
    CommandRejected,
    CommandDispatched,
    CommandAcknowledged,
    CommandConverged,
    CommandFailed,
    CommandExpired,
    CommandSuperseded,
    DesiredStateSet,
    StateReported,
    DeviceWentOffline,
    DeviceCameOnline,
    AnomalyDetected,
    DeviceCredentialsIssued,
    DeviceCredentialsRevoked,
    DeviceRebootRequested,
    DeviceFirmwareUpdateRequested,
    DeviceQuarantined,
    DeviceReleased,
    DeviceShardMoved,
    DeviceCredentialsLoaded,
)
AnyEvent = Union[EVENT_TYPES]  # type: ignore[valid-type]  # noqa: UP007


_events = RecordCodec(AnyEvent, EVENT_TYPES, "type")
_inbound = RecordCodec(AnyInbound, INBOUND_TYPES, "kind")

encode = _events.encode  # encodes any record struct of these modules to JSON bytes


def decode_event(data: bytes | str | None) -> Event:
    """Decode one journal record; raises ``MalformedRecord`` with a reason."""
    event: Event = _events.decode(data)
    return event


def decode_inbound(data: bytes | str | None) -> Inbound:
    """Decode one inbox record; raises ``MalformedRecord`` with a reason."""
    request: Inbound = _inbound.decode(data)
    return request


class _FactType(msgspec.Struct):
    type: str = ""


_fact_type_decoder = msgspec.json.Decoder(_FactType)


def fact_type(data: bytes | str | None) -> str:
    """The wire type of an encoded fact, reading nothing else: for consumers that skip most facts.

    Returns "" when there is none or the record is not JSON (``decode_event`` says why, if it matters).
    """
    try:
        return _fact_type_decoder.decode(data or b"").type
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return ""
