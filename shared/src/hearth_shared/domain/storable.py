"""Whether a decoded fact can be stored, and a decoded request acted on: one check per record family.

A record can decode (valid JSON, the right fields and types) and still be poison: a device name with a
NUL that PostgreSQL text cannot hold, an id that no Redis channel, URL or MQTT topic should carry, an
integer msgpack and bigint cannot hold, a state value nested where every consumer expects a scalar.
The edges refuse these (``hearth_shared.schema.ids``); a record that got past an edge anyway (an older
version, a planted record, a bug) must become a dead letter with its reason, never a crash, in every
consumer. So each consumer asks exactly one question per record, right after decoding it:

* ``fact_problem(event)``: can this journal fact be stored and projected? (projector, rebuild,
  command API's device book)
* ``request_problem(request)``: can the device actor act on this inbox request? It must not turn into
  a fact that some consumer cannot store, so the rules are the facts' rules plus the request's shape.

Both return a ``MalformedRecord`` (reason and detail, for the dead letter) or None; ``decode_fact`` and
``decode_request`` decode and check in one call. Pure: no I/O, no broker or database imports.

The checks are on the hot paths of the actor, the projector and a rebuild, so their costly part (walking
every string of the record) runs only when the record's bytes could hold a control character: JSON
escapes control characters below 0x20 (``\\n``, ``\\u0000``...), and DEL and the C1 controls (lead
byte 0xC2 in UTF-8) are the only others; an ASCII test and two byte searches tell. Integers beyond
64 bits can only be in the free-form JSON objects (state, params, desired), which are looked at
directly; ids and state keys repeat, so the ones that passed are remembered.
"""

from __future__ import annotations

from typing import Any

import msgspec

from hearth_shared.domain.registry import DEVICE_TYPES
from hearth_shared.schema.events import (
    AnomalyDetected,
    Event,
    Inbound,
    MalformedRecord,
    MoveDeviceShard,
    RecordCredentialsLoaded,
    RegisterDevice,
    ReportState,
    StateReported,
    SubmitCommand,
    decode_event,
    decode_inbound,
)
from hearth_shared.schema.ids import INT64_MAX, INT64_MIN, find_unstorable, is_identifier

INT32_MAX = 2**31 - 1  # alerts.model_version is a PostgreSQL integer
# A request this large is no device's or user's (they are well under 1 KiB): its facts, and the twin
# that would keep its params, could outgrow what a producer may send (1 MiB) and stop the actor.
MAX_REQUEST_BYTES = 64 * 1024
_JSON_FIELDS = ("reported", "params", "desired")  # the payloads' free-form JSON objects
MAX_KNOWN_IDENTIFIERS = 1 << 17  # ids and state keys repeat: the ones that passed are remembered
_known_identifiers: set[str] = set()


def _identifier(value: str) -> bool:
    if value in _known_identifiers:
        return True
    if not is_identifier(value):  # (never remembered: at most 64 characters when it passes)
        return False
    if len(_known_identifiers) >= MAX_KNOWN_IDENTIFIERS:
        _known_identifiers.clear()
    _known_identifiers.add(value)
    return True


_json_fields_by_type: dict[type, tuple[tuple[str, str], ...]] = {}


def _json_fields(payload_type: type) -> tuple[tuple[str, str], ...]:
    """Which of ``_JSON_FIELDS`` a payload type has, each with its path for a problem's detail (worked
    out once per type, not per record)."""
    names = _json_fields_by_type.get(payload_type)
    if names is None:
        fields = getattr(payload_type, "__struct_fields__", ())
        names = tuple((n, f"payload.{n}") for n in _JSON_FIELDS if n in fields)
        _json_fields_by_type[payload_type] = names
    return names


def fact_problem(event: Event, wire: bytes | None = None) -> MalformedRecord | None:
    """Why ``event`` cannot be stored, or None. ``wire``: the record as read, to skip the walk over its
    strings when its bytes cannot hold a control character."""
    if type(event) is StateReported and _plain_report(event, wire):
        return None  # nine facts in ten: their checks at once (any doubt: the checks below say why)
    if not (event.device_id in _known_identifiers and event.home_id in _known_identifiers):
        problem = _ids_problem(event.device_id, event.home_id)  # (the hot path: both known and good)
        if problem is not None:
            return problem
    if not 1 <= event.version <= INT64_MAX:
        return MalformedRecord("out_of_range", f"version {event.version} is outside 1..{INT64_MAX}")
    payload: Any = getattr(event, "payload", None)
    if isinstance(event, StateReported) and not INT64_MIN <= payload.device_seq <= INT64_MAX:
        return MalformedRecord("out_of_range", f"payload.device_seq {payload.device_seq} is beyond 64 bits")
    if isinstance(event, AnomalyDetected) and not 0 <= payload.model_version <= INT32_MAX:
        return MalformedRecord("out_of_range", f"payload.model_version {payload.model_version}")
    if _suspect(wire):
        return _unstorable(msgspec.to_builtins(event))
    for name, where in _json_fields_by_type.get(type(payload)) or _json_fields(type(payload)):
        data = getattr(payload, name)
        if data:
            problem = _json_problem(data, where)
            if problem is not None:
                return problem
    return None


def _plain_report(event: StateReported, wire: bytes | None) -> bool:
    """A state report with known ids, every integer within 64 bits, a flat state and bytes that cannot
    hold a control character: what the checks of ``fact_problem`` pass, told in one expression."""
    payload = event.payload
    return (
        event.device_id in _known_identifiers
        and event.home_id in _known_identifiers
        and 1 <= event.version <= INT64_MAX
        and INT64_MIN <= payload.device_seq <= INT64_MAX
        and not _suspect(wire)
        and _flat_within_64_bits(payload.reported)
    )


def _flat_within_64_bits(state: dict[str, Any]) -> bool:
    for value in state.values():
        kind = type(value)
        if kind is int:
            if not INT64_MIN <= value <= INT64_MAX:
                return False
        elif kind is dict or kind is list:
            return False
    return True


def request_problem(request: Inbound, wire: bytes | None = None) -> MalformedRecord | None:
    """Why the device actor must not act on ``request``, or None (``wire``: as for ``fact_problem``)."""
    problem = _ids_problem(request.device_id, getattr(request, "home_id", None))
    if problem is not None:
        return problem
    if isinstance(request, ReportState):
        if not INT64_MIN <= request.device_seq <= INT64_MAX:
            return MalformedRecord("out_of_range", f"device_seq {request.device_seq} is beyond 64 bits")
        problem = _state_problem(request.state)
    elif isinstance(request, RegisterDevice) and request.device_type not in DEVICE_TYPES:
        known = ", ".join(DEVICE_TYPES)
        problem = MalformedRecord("unknown_device_type", f"{request.device_type!r:.80} is not one of {known}")
    elif isinstance(request, RegisterDevice | MoveDeviceShard | RecordCredentialsLoaded) and not _identifier(
        request.shard
    ):
        problem = MalformedRecord("invalid_shard", f"{request.shard!r:.80} is not a shard name")
    elif isinstance(request, SubmitCommand):
        if not _identifier(request.name):
            problem = MalformedRecord("invalid_command_name", f"{request.name!r:.80} is not a command name")
        else:
            problem = _json_problem(request.params, "params")
    if problem is None and _suspect(wire):
        problem = _unstorable(msgspec.to_builtins(request))
    return problem


def decode_fact(data: bytes | None) -> Event:
    """Decode a journal record and check it; raises ``MalformedRecord`` with the reason."""
    event = decode_event(data)
    problem = fact_problem(event, data)
    if problem is not None:
        raise problem
    return event


def decode_request(data: bytes | None) -> Inbound:
    """Decode an inbox record and check it; raises ``MalformedRecord`` with the reason."""
    if data is not None and len(data) > MAX_REQUEST_BYTES:
        raise MalformedRecord("too_large", f"{len(data)} bytes; a request may have {MAX_REQUEST_BYTES}")
    request = decode_inbound(data)
    problem = request_problem(request, data)
    if problem is not None:
        raise problem
    return request


def _suspect(wire: bytes | None) -> bool:
    """Could the JSON ``wire`` hold a control character (see above)? Unknown (None): yes. Any byte
    beyond ASCII counts (one fast pass for the C1 controls' lead byte 0xC2 and all others): records with
    non-ASCII text take the walk, which finds nothing in them unless a control character is there."""
    return wire is None or not wire.isascii() or _BACKSLASH in wire or _DEL in wire


_BACKSLASH, _DEL = ord("\\"), 0x7F  # searched as byte values: a memchr (a one-byte bytes needle is 5x slower)


def _ids_problem(device_id: str, home_id: str | None) -> MalformedRecord | None:
    if _identifier(device_id) and (home_id is None or _identifier(home_id)):
        return None  # (the hot path: no tuple to build and walk per record)
    for name, value in (("device_id", device_id), ("home_id", home_id)):
        if value is not None and not _identifier(value):
            return MalformedRecord(
                "invalid_identifier", f"{name} {value!r:.80} does not match the id pattern"
            )
    return None


def _state_problem(state: dict[str, Any]) -> MalformedRecord | None:
    """A reported state is flat: identifier keys, scalar values (string, number, boolean or null)."""
    for key, value in state.items():
        if not _identifier(key):
            return MalformedRecord("invalid_state", f"state key {key!r:.80} is not a key name")
        kind = type(value)
        if kind is dict or kind is list:
            return MalformedRecord("wrong_type", f"state.{key} is a {kind.__name__}, not a scalar")
        if kind is int and not INT64_MIN <= value <= INT64_MAX:
            return _unstorable_at(f"state.{key}")
    return None


def _json_problem(data: dict[str, Any], where: str) -> MalformedRecord | None:
    """An integer beyond 64 bits in a JSON object (nested values are walked whole)."""
    for key, value in data.items():
        kind = type(value)
        if kind is int:
            if not INT64_MIN <= value <= INT64_MAX:
                return _unstorable_at(f"{where}.{key}")
        elif kind is dict or kind is list:
            found = find_unstorable(value, f"{where}.{key}")
            if found is not None:
                return _unstorable_at(found)
    return None


def _unstorable(record: Any) -> MalformedRecord | None:
    where = find_unstorable(record)
    return None if where is None else _unstorable_at(where)


def _unstorable_at(where: str) -> MalformedRecord:
    return MalformedRecord(
        "unstorable_value",
        f"{where} holds a NUL or control character, a non-finite number or a >64-bit integer",
    )
