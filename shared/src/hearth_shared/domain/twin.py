"""The device twin: everything the device actor knows about one device.

A twin is never edited in place: ``evolve`` (evolve.py) folds the device's facts into a new one, so
replaying the journal rebuilds exactly the same twin.

Data only, at the bottom of the domain: the device types' planners take a ``Twin`` (device_type.py), so
this module imports no type. What needs a type's rules to read a twin (its ``delta`` under the type's
tolerances, the view the contract shows) is ``twin_view.py``, above the registry; an import of the
registry from here would close the cycle twin -> registry -> device_type -> twin (the layers contract in
pyproject.toml fails on it, also from inside a function).

Stored (the device actor's table, the projector's cache) as msgpack arrays (``encode_twin``), not maps:
the actor holds every device's twin encoded in memory, and the field names were a third of its bytes.
So from now on a field is only ever added at the end, with a default (an older array then reads with it
at its default), never removed or moved. ``decode_twin`` reads twins stored as maps before 2026-11-29.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

import msgspec

from hearth_shared.schema.events import JSON
from hearth_shared.schema.shards import DEFAULT_SHARD

CommandStatus = Literal["pending", "accepted", "dispatched", "acknowledged"]


class CommandState(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """A command still under way. Once terminal (converged, failed, ...) it leaves the twin."""

    command_id: uuid.UUID
    name: str
    params: JSON
    setting: str = ""  # the supersede group ("target", "lock", ...), known once accepted
    desired: JSON = msgspec.field(default_factory=dict)  # the keys it sets, known once accepted
    status: CommandStatus
    expires_at: datetime
    requested_at: datetime


class Quarantine(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """Why and since when an admin took the device out of service (hearth_shared.domain.admin)."""

    reason: str
    since: datetime


class Twin(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    device_id: str
    home_id: str
    device_type: str
    name: str
    desired: JSON
    reported: JSON
    version: int  # the version of the last fact applied
    online: bool = False
    last_seen: datetime | None = None
    # When it last went offline (that fact's recorded_at): a state report sent before then does not bring
    # it back online (decide.py, _report).
    offline_at: datetime | None = None
    updated_at: datetime
    last_device_seq: int = -1  # the highest device_seq recorded
    # Where a key was last carried by a report (changed or not): a report that comes after a newer one
    # records only the keys no newer report carried (decide.py, _report). Each key of ``reported`` that the
    # newest report (``last_device_seq``) did not carry, with the seq of the newest that did (-1: none, as
    # a registration's initial values); a key of ``reported`` without an entry was carried by the newest
    # (``carried_at``). So a device that reports its whole state has none, and one that reports what
    # changed about one per key (evolve.py keeps it so).
    older_key_seqs: dict[str, int] = msgspec.field(default_factory=dict)
    commands: dict[str, CommandState] = msgspec.field(default_factory=dict)  # by str(command_id)
    # The last few commands that ended, so a request redelivered after its command ended (a worker
    # restarted between recording facts and committing its inbox offsets) is not decided again.
    finished: tuple[str, ...] = ()
    simulated: bool = False  # registered with "simulated": true (the stack's simulator hub plays it)
    # The device's MQTT credential in force (device.credentials_issued), None before one or after a revoke.
    credential_id: uuid.UUID | None = None
    # The last few credentials revoked, so an issue request redelivered after a later rotation does not
    # bring its (revoked) credential back.
    revoked_credentials: tuple[uuid.UUID, ...] = ()
    # Set by device.quarantined, cleared by device.released: it refuses every non-admin command meanwhile.
    quarantine: Quarantine | None = None
    # Its MQTT broker shard (device.registered, then device.shard_moved): where its commands are sent.
    shard: str = DEFAULT_SHARD
    # The credential its shard's broker has loaded (device.credentials_loaded); a move clears it.
    loaded_credential: uuid.UUID | None = None


FINISHED_KEPT = 16


def carried_at(twin: Twin, key: str) -> int:
    """The seq of the newest report that carried ``key`` (-1: none did)."""
    seq = twin.older_key_seqs.get(key)
    if seq is not None:
        return seq
    return twin.last_device_seq if key in twin.reported else -1


encode_twin = msgspec.msgpack.Encoder().encode
_decode_array = msgspec.msgpack.Decoder(Twin).decode
_MAPS = {*range(0x80, 0x90), 0xDE, 0xDF}  # the first byte of a msgpack map


def decode_twin(data: bytes) -> Twin:
    """A stored twin: an array (``encode_twin``), or a map as stored before 2026-11-29."""
    if data[0] not in _MAPS:
        return _decode_array(data)
    raw = msgspec.msgpack.decode(data)
    raw["commands"] = {key: _in_order(CommandState, c) for key, c in raw.get("commands", {}).items()}
    if raw.get("quarantine") is not None:
        raw["quarantine"] = _in_order(Quarantine, raw["quarantine"])
    return msgspec.convert(_in_order(Twin, raw), Twin)


def _in_order(struct: type[msgspec.Struct], fields: dict[str, Any]) -> list[Any]:
    """A struct's fields from a map, as the array its type reads (a field the map lacks at its default)."""
    values = []
    for field in msgspec.structs.fields(struct):
        if field.name in fields:
            values.append(fields[field.name])
        elif field.default_factory is not msgspec.NODEFAULT:
            values.append(field.default_factory())
        elif field.default is not msgspec.NODEFAULT:
            values.append(field.default)
        else:
            raise msgspec.ValidationError(f"Object missing required field `{field.name}`")
    return values
