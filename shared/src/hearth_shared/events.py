"""The one event schema: every record in the journal, and every request on the inbox.

Two record families travel through Kafka, both JSON on the wire:

* **Facts** (``Event`` subclasses) live in the journal topic. Only the device actor writes them: it is
  the single writer per device, so it can number each device's facts ``version`` 1, 2, 3, ... Every
  fact carries the envelope of ../shared/CONTRACT.md and a stable wire ``type``.
* **Requests** (``Inbound`` subclasses) live in the inbox topic. The command API and the devices write
  them; the device actor decides what they mean and records facts. A request is not a fact yet: a
  command is ``pending`` from the moment its request is in the inbox until the actor decides on it.

Both families are frozen msgspec structs joined in tagged unions and decoded by one decoder each, built
once at import. Old ``schema_version``s are upcast on the slow path (``register_upcaster``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, TypeAlias, Union

import msgspec

JSON: TypeAlias = dict[str, Any]


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> uuid.UUID:
    return uuid.uuid4()


class MalformedRecord(ValueError):
    """A record that cannot be decoded; ``reason`` is short and machine-readable."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# --------------------------------------------------------------------------------------------- payloads


class Payload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """Base of every payload."""


class DeviceRegisteredPayload(Payload, frozen=True, kw_only=True):
    device_type: str
    name: str
    simulated: bool = False  # played by the local stack's simulator hub (facts before it decode as False)


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


class StateReportedPayload(Payload, frozen=True, kw_only=True):
    """What the device said about itself: the reported keys that changed, with its own clock and seq."""

    reported: JSON
    device_seq: int
    device_time: datetime


class CredentialsIssuedPayload(Payload, frozen=True, kw_only=True):
    """A device's MQTT secret, as its salted hash only (``hearth_shared.credentials``: Mosquitto's ``$7$``
    PBKDF2-SHA512 format, the very string the broker checks). The plaintext is never in the journal."""

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


class QuarantinedPayload(Payload, frozen=True, kw_only=True):
    """Why an admin quarantined the device, and since when (the platform's clock)."""

    reason: str
    since: datetime


class ReleasedPayload(Payload, frozen=True, kw_only=True):
    """The quarantine ended; ``reason`` is the one it had."""

    reason: str


# ----------------------------------------------------------------------------------------------- facts


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """The envelope every journal fact carries. Subclasses add ``payload`` and a wire ``type`` tag."""

    SCHEMA_VERSION: ClassVar[int] = 1

    event_id: uuid.UUID
    schema_version: int = 1
    device_id: str
    home_id: str
    version: int
    occurred_at: datetime
    recorded_at: datetime
    causation_id: uuid.UUID | None = None
    correlation_id: uuid.UUID | None = None

    @property
    def type(self) -> str:
        return wire_name(type(self))


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


class ThermostatTargetSet(Event, frozen=True, kw_only=True, tag="thermostat.target_set"):
    payload: DesiredSetPayload


class ThermostatHvacModeSet(Event, frozen=True, kw_only=True, tag="thermostat.hvac_mode_set"):
    payload: DesiredSetPayload


class LockDesiredStateSet(Event, frozen=True, kw_only=True, tag="lock.desired_state_set"):
    payload: DesiredSetPayload


class DesiredStateSet(Event, frozen=True, kw_only=True, tag="device.desired_set"):
    """A command's desired keys, for any device type (the payload names the setting): a type declares
    its settings in its module and needs no fact of its own here. Thermostats and locks keep their
    older type-specific facts above, which journals already hold."""

    payload: DesiredSetPayload


class StateReported(Event, frozen=True, kw_only=True, tag="device.state_reported"):
    payload: StateReportedPayload


class DeviceCredentialsIssued(Event, frozen=True, kw_only=True, tag="device.credentials_issued"):
    payload: CredentialsIssuedPayload


class DeviceCredentialsRevoked(Event, frozen=True, kw_only=True, tag="device.credentials_revoked"):
    payload: CredentialsRevokedPayload


class DeviceWentOffline(Event, frozen=True, kw_only=True, tag="device.went_offline"):
    payload: ConnectivityPayload


class DeviceCameOnline(Event, frozen=True, kw_only=True, tag="device.came_online"):
    payload: ConnectivityPayload


class AnomalyDetected(Event, frozen=True, kw_only=True, tag="anomaly.detected"):
    payload: AnomalyDetectedPayload


# Administration (hearth_shared.domain.admin): admin commands record what they desire like a type's
# settings do; quarantine and release are facts of their own.
class DeviceRebootRequested(Event, frozen=True, kw_only=True, tag="device.reboot_requested"):
    payload: DesiredSetPayload


class DeviceFirmwareUpdateRequested(Event, frozen=True, kw_only=True, tag="device.firmware_update_requested"):
    payload: DesiredSetPayload


class DeviceQuarantined(Event, frozen=True, kw_only=True, tag="device.quarantined"):
    payload: QuarantinedPayload


class DeviceReleased(Event, frozen=True, kw_only=True, tag="device.released"):
    payload: ReleasedPayload


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
    ThermostatTargetSet,
    ThermostatHvacModeSet,
    LockDesiredStateSet,
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
)
AnyEvent = Union[EVENT_TYPES]  # type: ignore[valid-type]  # noqa: UP007

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


def wire_name(cls: type[msgspec.Struct]) -> str:
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


# -------------------------------------------------------------------------------------------- requests


class Inbound(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """A request on the inbox, keyed by device_id. ``request_id`` makes retries harmless."""

    SCHEMA_VERSION: ClassVar[int] = 1

    request_id: uuid.UUID
    schema_version: int = 1
    device_id: str
    sent_at: datetime


class RegisterDevice(Inbound, frozen=True, kw_only=True, tag="register_device"):
    home_id: str
    device_type: str
    name: str
    simulated: bool = False


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
)
AnyInbound = Union[INBOUND_TYPES]  # type: ignore[valid-type]  # noqa: UP007


class DeviceCommand(msgspec.Struct, frozen=True, kw_only=True):
    """What the actor dispatches to a device on the device-bound topic."""

    command_id: uuid.UUID
    device_id: str
    name: str
    params: JSON
    expires_at: datetime


class Baseline(msgspec.Struct, frozen=True, array_like=True):
    """Sufficient statistics of one metric in one slice: count, mean, standard deviation."""

    n: int
    mean: float
    std: float


class AnomalyModel(msgspec.Struct, frozen=True, kw_only=True):
    """Anomaly model parameters, as the analytics job publishes them to the compacted models topic
    (keyed by ``name``; the newest ``version`` wins). See ``hearth_shared.domain.anomaly`` for scoring.

    ``by_type`` and ``by_device`` map ``metric -> hour-of-day ("0".."23", or "*" for all hours) ->
    Baseline``; ``by_type`` is keyed by device type first, ``by_device`` by device id first.
    """

    SCHEMA_VERSION: ClassVar[int] = 1

    schema_version: int = 1
    name: str = "telemetry-anomaly"
    version: int
    trained_at: datetime
    trained_on: int  # readings the statistics were computed from
    threshold: float  # a reading whose z-score exceeds this is an anomaly
    min_count: int = 30  # a slice with fewer readings is not trusted; a coarser one is used
    by_type: dict[str, dict[str, dict[str, Baseline]]] = {}
    by_device: dict[str, dict[str, dict[str, Baseline]]] = {}


_model_decoder = msgspec.json.Decoder(AnomalyModel)


def decode_model(data: bytes | str | None) -> AnomalyModel:
    if data is None:
        raise MalformedRecord("no_value", "the record has no value (a tombstone)")
    try:
        return _model_decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        raise MalformedRecord("invalid_model", str(exc) or type(exc).__name__) from exc


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    """A record no consumer could read, with where it came from and why.

    ``value`` is the record's value as text (undecodable bytes replaced), cut to an excerpt when the
    record is large: a dead letter must always fit in what the producer may send, or sending it would
    fail on the very record it reports. ``value_size`` is the whole value's size in bytes (-1: the
    record had no value, a tombstone) and ``value_truncated`` says whether ``value`` is all of it;
    ``key`` is cut the same way. Letters written before these two fields existed read as whole values.
    """

    source_topic: str
    partition: int
    offset: int
    key: str | None
    reason: str
    detail: str
    consumer: str
    value: str
    failed_at: datetime
    value_size: int = 0
    value_truncated: bool = False


# ----------------------------------------------------------------------------------------- the codecs

Upcaster = Callable[[JSON], JSON]
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register_upcaster(wire_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register ``fn(raw) -> raw`` that turns a ``from_version`` record of ``wire_type`` into the next.

    The function receives and returns the whole record as plain JSON and must set the new
    ``schema_version``; chains run until the record reaches the current version.
    """

    def register(fn: Upcaster) -> Upcaster:
        _UPCASTERS[(wire_type, from_version)] = fn
        return fn

    return register


class _Codec:
    """One decoder and one encoder for a tagged union, built once."""

    def __init__(self, union: Any, types: tuple[type[msgspec.Struct], ...], tag_field: str) -> None:
        self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(union)
        self._union = union
        self._tag_field = tag_field
        self._current = {wire_name(t): t.SCHEMA_VERSION for t in types}  # type: ignore[attr-defined]
        self.encode = msgspec.json.Encoder().encode

    def decode(self, data: bytes | str | None) -> Any:
        if data is None:
            raise MalformedRecord("no_value", "the record has no value (a tombstone)")
        try:
            record = self._decoder.decode(data)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            return self._decode_slow(data)
        if record.schema_version != record.SCHEMA_VERSION:
            return self._decode_slow(data)
        return record

    def _decode_slow(self, data: bytes | str) -> Any:
        try:
            raw = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise MalformedRecord("invalid_json", str(exc)) from exc
        except RecursionError as exc:  # nested deeper than a decoder may recurse: poison, not a crash
            raise MalformedRecord("too_deep", "JSON nested too deeply to decode") from exc
        if not isinstance(raw, dict):
            raise MalformedRecord("not_an_object", f"expected a JSON object, got {type(raw).__name__}")
        tag = raw.get(self._tag_field)
        if tag not in self._current:
            raise MalformedRecord("unknown_type", f"{self._tag_field}={tag!r} is not a known record type")
        version = raw.get("schema_version", 1)
        if not isinstance(version, int) or version > self._current[tag]:
            raise MalformedRecord("unsupported_schema_version", f"{tag} schema_version={version!r}")
        while version < self._current[tag]:
            upcast = _UPCASTERS.get((tag, version))
            if upcast is None:
                raise MalformedRecord("no_upcaster", f"no upcaster for {tag} from schema_version {version}")
            raw = upcast(raw)
            version = raw["schema_version"]
        try:
            return msgspec.convert(raw, self._union)
        except msgspec.ValidationError as exc:
            raise MalformedRecord("invalid_fields", f"{tag}: {exc}") from exc


_events = _Codec(AnyEvent, EVENT_TYPES, "type")
_inbound = _Codec(AnyInbound, INBOUND_TYPES, "kind")

encode = _events.encode  # encodes any struct of this module to JSON bytes


def decode_event(data: bytes | str | None) -> Event:
    """Decode one journal record; raises ``MalformedRecord`` with a reason."""
    event: Event = _events.decode(data)
    return event


def decode_inbound(data: bytes | str | None) -> Inbound:
    """Decode one inbox record; raises ``MalformedRecord`` with a reason."""
    request: Inbound = _inbound.decode(data)
    return request


_device_command_decoder = msgspec.json.Decoder(DeviceCommand)


def decode_device_command(data: bytes | str | None) -> DeviceCommand:
    try:
        return _device_command_decoder.decode(data or b"")
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        raise MalformedRecord("invalid_device_command", str(exc) or type(exc).__name__) from exc


def to_builtins(struct: msgspec.Struct) -> JSON:
    """A struct as plain JSON-compatible Python (what the HTTP APIs return)."""
    data: JSON = msgspec.to_builtins(struct)
    return data


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
