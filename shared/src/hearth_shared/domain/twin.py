"""The device twin: everything the device actor knows about one device.

A twin is never edited in place: ``evolve`` (evolve.py) folds the device's facts into a new one, so
replaying the journal rebuilds exactly the same twin.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

import msgspec

from hearth_shared.events import JSON

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
    updated_at: datetime
    last_device_seq: int = -1  # the highest device_seq applied; older reports are ignored
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

    @property
    def delta(self) -> JSON:
        """The desired keys the device has not reported (yet), within its type's tolerances (the same
        rule that converges a command)."""
        from hearth_shared.domain.registry import reported_matches  # the registry imports this module

        return {
            key: value
            for key, value in self.desired.items()
            if not reported_matches(self.device_type, key, value, self.reported)
        }


FINISHED_KEPT = 16


def twin_view(twin: Twin) -> JSON:
    """The twin as the public contract shows it (JSON-ready)."""
    return {
        "device_id": twin.device_id,
        "home_id": twin.home_id,
        "type": twin.device_type,
        "name": twin.name,
        "desired": dict(twin.desired),
        "reported": dict(twin.reported),
        "delta": twin.delta,
        "version": twin.version,
        "connectivity": {
            "online": twin.online,
            "last_seen": twin.last_seen.isoformat() if twin.last_seen else None,
        },
        "firmware_version": twin.reported.get("firmware_version"),
        "updated_at": twin.updated_at.isoformat(),
        "quarantine": (
            {"reason": twin.quarantine.reason, "since": twin.quarantine.since.isoformat()}
            if twin.quarantine
            else None
        ),
    }
