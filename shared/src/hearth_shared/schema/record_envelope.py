"""The envelopes of Hearth's records and the codec that reads them (``hearth_shared.schema.events`` gathers
them).

* ``Event``: the envelope every journal fact carries (../shared/CONTRACT.md), numbered ``version`` 1, 2,
  3 ... per device by its single writer, the device actor; ``Inbound``: a request on the inbox, keyed
  by ``device_id``, whose ``request_id`` makes retries harmless. Subclasses add a ``payload`` (a
  ``Payload``) or their fields, and a stable wire tag.
* ``RecordCodec``: one decoder and one encoder for a tagged union, built once at import; a record of an
  older ``schema_version``, or of a retired type, is upcast on the slow path by the functions
  ``register_upcaster`` records (the fast decoder refuses both: the version check, the unknown tag), and a
  record it cannot read raises ``MalformedRecord`` with a short, machine-readable reason.

Pure: msgspec only (the purity contract in pyproject.toml).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeAlias

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


class Payload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """Base of every payload."""


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


class Inbound(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """A request on the inbox, keyed by device_id. ``request_id`` makes retries harmless."""

    SCHEMA_VERSION: ClassVar[int] = 1

    request_id: uuid.UUID
    schema_version: int = 1
    device_id: str
    sent_at: datetime


def wire_name(cls: type[msgspec.Struct]) -> str:
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


def to_builtins(struct: msgspec.Struct) -> JSON:
    """A struct as plain JSON-compatible Python (what the HTTP APIs return)."""
    data: JSON = msgspec.to_builtins(struct)
    return data


Upcaster = Callable[[JSON], JSON]
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}
_MAX_UPCASTS = 16  # a chain longer than this is a bug (an upcaster that does not move the record on)


def register_upcaster(wire_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register ``fn(raw) -> raw`` that turns a ``from_version`` record of ``wire_type`` into the next.

    The function receives and returns the whole record as plain JSON and must set the new
    ``schema_version``; chains run until the record reaches the current version. A ``wire_type`` that is
    no longer a record type (a retired fact) may be upcast into another type: the function sets the new
    type tag too, and the chain goes on from that type's upcasters.
    """

    def register(fn: Upcaster) -> Upcaster:
        _UPCASTERS[(wire_type, from_version)] = fn
        return fn

    return register


def _upcaster(tag: object, version: object) -> Upcaster | None:
    if isinstance(tag, str) and isinstance(version, int):
        return _UPCASTERS.get((tag, version))
    return None


class RecordCodec:
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
        for _ in range(_MAX_UPCASTS):
            tag, version = raw.get(self._tag_field), raw.get("schema_version", 1)
            current = self._current.get(tag) if isinstance(tag, str) else None
            if current is not None:
                if not isinstance(version, int) or version > current:
                    raise MalformedRecord("unsupported_schema_version", f"{tag} schema_version={version!r}")
                if version == current:
                    break
            upcast = _upcaster(tag, version)
            if upcast is None and current is None:
                raise MalformedRecord("unknown_type", f"{self._tag_field}={tag!r} is not a known record type")
            if upcast is None:
                raise MalformedRecord("no_upcaster", f"no upcaster for {tag} from schema_version {version}")
            raw = upcast(raw)
        else:
            raise MalformedRecord("upcast_loop", f"{tag!r} is still being upcast after {_MAX_UPCASTS} steps")
        try:
            return msgspec.convert(raw, self._union)
        except msgspec.ValidationError as exc:
            raise MalformedRecord("invalid_fields", f"{tag}: {exc}") from exc
