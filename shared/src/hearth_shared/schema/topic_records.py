"""The records of Hearth's other topics: the commands the actor dispatches to devices, the anomaly
models analytics publishes, and the dead letters of records no consumer could read."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import ClassVar

import msgspec

from hearth_shared.schema.record_envelope import JSON, MalformedRecord
from hearth_shared.schema.shards import DEFAULT_SHARD


class DeviceCommand(msgspec.Struct, frozen=True, kw_only=True):
    """What the actor dispatches to a device on the device-bound topic; ``shard`` is the device's MQTT
    broker shard then: only that shard's gateways publish it (records before shards: the one broker)."""

    command_id: uuid.UUID
    device_id: str
    name: str
    params: JSON
    expires_at: datetime
    shard: str = DEFAULT_SHARD


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


_device_command_decoder = msgspec.json.Decoder(DeviceCommand)


def decode_device_command(data: bytes | str | None) -> DeviceCommand:
    try:
        return _device_command_decoder.decode(data or b"")
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        raise MalformedRecord("invalid_device_command", str(exc) or type(exc).__name__) from exc
