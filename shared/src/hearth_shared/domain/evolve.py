"""``evolve``: apply one fact to a twin. Pure and deterministic, so a replay rebuilds the same twin.

``reports_folded``: a device's consecutive state reports at once (a rebuild's replay folds a batch's
reports of a device this way): the same twin as ``evolve`` of each in turn, because a report changes
only what the last one sets (version, times), keeps the highest sequence, and merges its state into the
reported state and its keys' sequences into ``key_seqs`` (``carried``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from hearth_shared.domain.admin import ADMIN_SETTINGS
from hearth_shared.domain.registry import DEVICE_TYPES
from hearth_shared.domain.twin import FINISHED_KEPT, CommandState, Quarantine, Twin
from hearth_shared.schema.events import (
    COMMAND_STATUS_BY_EVENT,
    TERMINAL_STATUSES,
    CommandRequested,
    DesiredSetPayload,
    DeviceCameOnline,
    DeviceCredentialsIssued,
    DeviceCredentialsLoaded,
    DeviceCredentialsRevoked,
    DeviceQuarantined,
    DeviceRegistered,
    DeviceReleased,
    DeviceShardMoved,
    DeviceWentOffline,
    Event,
    StateReported,
    StateReportedPayload,
)


def evolve(twin: Twin | None, event: Event) -> Twin:
    """The twin after ``event``. Facts at or below the twin's version were applied already: ignored."""
    if twin is None:
        if not isinstance(event, DeviceRegistered):
            raise ValueError(f"{event.type} v{event.version} of {event.device_id} before device.registered")
        kind = DEVICE_TYPES.get(event.payload.device_type)
        return Twin(
            device_id=event.device_id,
            home_id=event.home_id,
            device_type=event.payload.device_type,
            name=event.payload.name,
            desired={},
            reported=dict(kind.initial_reported) if kind else {},
            version=event.version,
            updated_at=event.recorded_at,
            simulated=event.payload.simulated,
            shard=event.payload.shard,
        )
    if event.version <= twin.version:
        return twin
    if isinstance(event, StateReported):  # most facts: one replace, no dict of changes (a replay's hot path)
        payload = event.payload
        key_seqs = twin.key_seqs.copy()
        carried(key_seqs, payload)
        seq = payload.device_seq if payload.device_seq > twin.last_device_seq else twin.last_device_seq
        return reports_folded(twin, event, {**twin.reported, **payload.reported}, key_seqs, seq)
    changes = _changes(twin, event)
    return _replace(twin, version=event.version, updated_at=event.recorded_at, **changes)


def carried(key_seqs: dict[str, int], payload: StateReportedPayload) -> None:
    """Into ``key_seqs``: each key the report carried (changed or not), at its sequence."""
    seq = payload.device_seq
    for key in payload.reported:  # (a loop: faster than update(dict.fromkeys(...)) for a few keys)
        key_seqs[key] = seq
    for key in payload.unchanged:
        key_seqs[key] = seq


def reports_folded(
    twin: Twin, last: StateReported, reported: dict[str, Any], key_seqs: dict[str, int], device_seq: int
) -> Twin:
    """The twin after state reports newer than it, ``last`` the latest, whose states merged over the
    twin's reported state give ``reported``, their keys' sequences (``carried``) over the twin's
    ``key_seqs``, and the highest sequence of them and the twin ``device_seq``."""
    return _replace(
        twin,
        version=last.version,
        updated_at=last.recorded_at,
        reported=reported,
        key_seqs=key_seqs,
        last_device_seq=device_seq,
        last_seen=last.recorded_at,  # when the platform heard it: its clock, not the device's
    )


_replace = msgspec.structs.replace


def _changes(twin: Twin, event: Event) -> dict[str, Any]:
    """The twin fields ``event`` changes (besides version and updated_at); a state report's are in
    ``evolve``."""
    payload: Any = getattr(event, "payload", None)
    device = _device_changes(twin, event, payload)
    if device is not None:
        return device
    if isinstance(payload, DesiredSetPayload):  # device.desired_set, device.reboot_requested, ...
        return {
            "desired": {**twin.desired, **payload.desired},
            "commands": _update(
                twin, str(payload.command_id), setting=_setting(payload, event), desired=payload.desired
            ),
        }
    if isinstance(event, CommandRequested):
        command = CommandState(
            command_id=payload.command_id,
            name=payload.name,
            params=payload.params,
            status="pending",
            expires_at=payload.expires_at,
            requested_at=event.occurred_at,
        )
        return {"commands": {**twin.commands, str(payload.command_id): command}}
    status = COMMAND_STATUS_BY_EVENT.get(type(event))
    if status in TERMINAL_STATUSES:
        ended = str(payload.command_id)
        return {
            "commands": {key: c for key, c in twin.commands.items() if key != ended},
            "finished": (*twin.finished, ended)[-FINISHED_KEPT:],
        }
    if status is not None:
        return {"commands": _update(twin, str(payload.command_id), status=status)}
    return {}  # a fact that does not change the twin's state (e.g. anomaly.detected)


def _device_changes(twin: Twin, event: Event, payload: Any) -> dict[str, Any] | None:
    """What a fact about the device itself (credentials, shard, quarantine, connectivity) changes; None
    for a fact about its commands or state."""
    if isinstance(event, DeviceCredentialsIssued):
        return {"credential_id": payload.credential_id}
    if isinstance(event, DeviceCredentialsRevoked):
        revoked = (*twin.revoked_credentials, payload.credential_id)[-FINISHED_KEPT:]
        if twin.credential_id == payload.credential_id:
            return {"credential_id": None, "revoked_credentials": revoked}
        return {"revoked_credentials": revoked}
    if isinstance(event, DeviceShardMoved):
        return {"shard": payload.shard, "loaded_credential": None}
    if isinstance(event, DeviceCredentialsLoaded):
        return {"loaded_credential": payload.credential_id}
    if isinstance(event, DeviceQuarantined):
        return {"quarantine": Quarantine(reason=payload.reason, since=payload.since)}
    if isinstance(event, DeviceReleased):
        return {"quarantine": None}
    if isinstance(event, DeviceCameOnline):
        return {"online": True, "last_seen": payload.last_seen}
    if isinstance(event, DeviceWentOffline):
        return {"online": False, "last_seen": payload.last_seen, "offline_at": event.recorded_at}
    return None


def _update(twin: Twin, command_id: str, **changes: Any) -> dict[str, CommandState]:
    command = twin.commands.get(command_id)
    if command is None:
        return twin.commands
    return {**twin.commands, command_id: msgspec.structs.replace(command, **changes)}


def _setting(payload: DesiredSetPayload, event: Event) -> str:
    """The setting a desired-state fact records: its payload says (older admin facts: their type does;
    the retired thermostat and lock facts get theirs from the upcaster that reads them)."""
    if payload.setting:
        return payload.setting
    return next((name for name, fact in ADMIN_SETTINGS.items() if fact is type(event)), "")
