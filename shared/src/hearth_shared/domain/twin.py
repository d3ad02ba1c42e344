"""The device twin: everything the device actor knows about one device.

A twin is never edited in place: ``evolve`` (evolve.py) folds the device's facts into a new one, so
replaying the journal rebuilds exactly the same twin.

Data only, at the bottom of the domain: the device types' planners take a ``Twin`` (device_type.py), so
this module imports no type. What needs a type's rules to read a twin (its ``delta`` under the type's
tolerances, the view the contract shows) is ``twin_view.py``, above the registry; an import of the
registry from here would close the cycle twin -> registry -> device_type -> twin (the layers contract in
pyproject.toml fails on it, also from inside a function).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

import msgspec

from hearth_shared.schema.events import JSON
from hearth_shared.schema.shards import DEFAULT_SHARD

CommandStatus = Literal["pending", "accepted", "dispatched", "acknowledged"]


class CommandState(msgspec.Struct, frozen=True, kw_only=True):
    """A command still under way. Once terminal (converged, failed, ...) it leaves the twin."""

    command_id: uuid.UUID
    name: str
    params: JSON
    setting: str = ""  # the supersede group ("target", "lock", ...), known once accepted
    desired: JSON = msgspec.field(default_factory=dict)  # the keys it sets, known once accepted
    status: CommandStatus
    expires_at: datetime
    requested_at: datetime


class Quarantine(msgspec.Struct, frozen=True, kw_only=True):
    """Why and since when an admin took the device out of service (hearth_shared.domain.admin)."""

    reason: str
    since: datetime


class Twin(msgspec.Struct, frozen=True, kw_only=True):
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
