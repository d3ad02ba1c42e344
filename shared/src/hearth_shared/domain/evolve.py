"""``evolve``: apply one fact to a twin. Pure and deterministic, so a replay rebuilds the same twin.

``reports_folded``: a device's consecutive state reports at once (a rebuild's replay folds a batch's
reports of a device this way): the same twin as ``evolve`` of each in turn, because a report changes
only what the last one sets (version, times), keeps the highest sequence, merges its state into the
reported state and notes which keys it carried (``older_key_seqs``).
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
        payload, last = event.payload, twin.last_device_seq
        older = older_key_seqs(twin.older_key_seqs, twin.reported, last, payload)
        seq = payload.device_seq if payload.device_seq > last else last
        return reports_folded(twin, event, {**twin.reported, **payload.reported}, older, seq)
    changes = _changes(twin, event)
    return _replace(twin, version=event.version, updated_at=event.recorded_at, **changes)


def older_key_seqs(
    older: dict[str, int], reported: dict[str, Any], last: int, payload: StateReportedPayload
) -> dict[str, int]:
    """A twin's ``older_key_seqs`` after a state report, from its ``older_key_seqs``, ``reported`` and
    ``last_device_seq`` (``last``) before it. A newer report: the keys it carried (changed or not) are at
    the newest seq now (no entry), and those the newest before it carried but it did not keep that one's
    seq. An older report (it came after a newer one): the keys it recorded get its seq."""
    seq, said, unchanged = payload.device_seq, payload.reported, payload.unchanged
    if seq <= last:
        return _recorded_late(older, seq, last, (*said, *unchanged))
    after = older.copy()
    if after:
        for key in said:
            if key in after:
                del after[key]
        for key in unchanged:
            if key in after:
                del after[key]
    # Keys of ``reported`` neither carried now nor with an entry (the newest before it carried them) get
    # that one's seq: counted before they are looked for, since a report of the whole state leaves none
    # (``unchanged`` keys are keys of ``reported``: decide names only those). Loops, not set operations:
    # faster for a dozen keys.
    covered = len(after) + len(said) + len(unchanged)
    for key in said:
        if key not in reported:
            covered -= 1
    if covered < len(reported):
        for key in reported:
            if key not in after and key not in said and key not in unchanged:
                after[key] = last
    return after


def _recorded_late(older: dict[str, int], seq: int, last: int, keys: tuple[str, ...]) -> dict[str, int]:
    """``older_key_seqs`` after a report at or below the newest seq recorded ``keys``: theirs is its seq,
    as an entry below ``last`` (at ``last`` itself, none: every entry stays below it)."""
    after = older.copy()
    for key in keys:
        if seq < last:
            after[key] = seq
        else:
            after.pop(key, None)
    return after


def reports_folded(
    twin: Twin, last: StateReported, reported: dict[str, Any], older: dict[str, int], device_seq: int
) -> Twin:
    """The twin after state reports newer than it, ``last`` the latest, whose states merged over the
    twin's reported state give ``reported``, folded one by one give ``older`` (``older_key_seqs``), and
    whose highest sequence and the twin's is ``device_seq``."""
    return _replace(
        twin,
        version=last.version,
        updated_at=last.recorded_at,
        reported=reported,
        older_key_seqs=older,
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
