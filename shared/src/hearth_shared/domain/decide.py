"""``decide`` what a request means for a device, ``tick`` the clock, and ``stamp`` the resulting facts.

``decide`` and ``tick`` return ``Change``s: facts without their envelope. The device actor stamps
them into events (``stamp``), appends them to the journal, and folds them into its twin (``evolve``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from hearth_shared.domain import admin
from hearth_shared.domain.change import Change as Change  # re-exported: decide returns them
from hearth_shared.domain.device_type import CommandInvalid, DeviceType
from hearth_shared.domain.registry import DEVICE_TYPES
from hearth_shared.domain.twin import CommandState, Twin, carried_at
from hearth_shared.schema.events import (
    JSON,
    AcknowledgeCommand,
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
    Event,
    Inbound,
    IssueCredentials,
    MoveDeviceShard,
    Payload,
    QuarantineDevice,
    RecordCredentialsLoaded,
    RegisterDevice,
    ReleaseDevice,
    ReportAvailability,
    ReportState,
    RevokeCredentials,
    ShardMovedPayload,
    StateReported,
    StateReportedPayload,
    SubmitCommand,
)

_MISSING = object()


def _about(command_id: uuid.UUID, event_type: type[Event], payload: Payload | None = None) -> Change:
    """A fact about a command (correlated by its id); the payload is just the id unless given."""
    if payload is None:
        payload = CommandRef(command_id=command_id)
    return Change(event_type, payload, correlation_id=command_id)


def late_report(twin: Twin | None, request: Inbound) -> bool:
    """A state report with nothing to record: at or below its twin's ``device_seq``, and each key it
    carries carried by a report at or above its seq (a duplicate, or one overtaken whole); ``decide``
    makes nothing of it (the actor counts them)."""
    return (
        isinstance(request, ReportState)
        and twin is not None
        and request.device_seq <= twin.last_device_seq
        and not _news(twin, request)
    )


def _news(twin: Twin, request: ReportState) -> JSON:
    """The keys of ``request`` that no report at or above its seq carried: every key of a report newer
    than the twin; of an older one (it came after a newer one: the command lane overtakes telemetry, a
    network reorders), those the newer reports did not carry, whose values are then still the newest the
    device said."""
    seq = request.device_seq
    if seq > twin.last_device_seq:
        return request.state
    return {key: value for key, value in request.state.items() if carried_at(twin, key) < seq}


def decide(twin: Twin | None, request: Inbound, now: datetime) -> list[Change]:
    """The facts ``request`` leads to; [] when it changes nothing (a duplicate, an old report...)."""
    if isinstance(request, RegisterDevice):
        if twin is not None or request.device_type not in DEVICE_TYPES:
            return []
        payload = DeviceRegisteredPayload(
            device_type=request.device_type,
            name=request.name,
            simulated=request.simulated,
            shard=request.shard,
        )
        return [Change(DeviceRegistered, payload)]
    if twin is None:  # only a registration creates a device; the API checks existence first
        return []
    if isinstance(request, SubmitCommand):
        return _submit(twin, request, now)
    if isinstance(request, ReportState):
        return _report(twin, request, now)
    if isinstance(request, AcknowledgeCommand):
        return _acknowledge(twin, request)
    if isinstance(request, ReportAvailability):
        return _availability(twin, request, now)
    if isinstance(request, IssueCredentials | RevokeCredentials):
        return _credentials(twin, request, now)
    if isinstance(request, QuarantineDevice | ReleaseDevice):
        return admin.quarantine_changes(twin, request, now)
    if isinstance(request, MoveDeviceShard):
        return _move(twin, request, now)
    if isinstance(request, RecordCredentialsLoaded):
        return _loaded(twin, request)
    return []


def _move(twin: Twin, request: MoveDeviceShard, now: datetime) -> list[Change]:
    """To another MQTT broker shard (nothing if it is there). An online device goes offline: its old
    broker drops it on the reload that no longer lists it, and Mosquitto sends no will for that (as for a
    revoked credential); it says ``online`` again from its new broker."""
    if request.shard == twin.shard:
        return []
    changes = [Change(DeviceShardMoved, ShardMovedPayload(shard=request.shard, from_shard=twin.shard))]
    if twin.online:
        changes.append(Change(DeviceWentOffline, ConnectivityPayload(last_seen=twin.last_seen or now)))
    return changes


def _loaded(twin: Twin, request: RecordCredentialsLoaded) -> list[Change]:
    """The device's shard's broker has loaded its credential in force: recorded once; a word about
    another credential, another shard, or one recorded already changes nothing."""
    if (
        request.credential_id != twin.credential_id
        or request.shard != twin.shard
        or twin.loaded_credential == request.credential_id
    ):
        return []
    payload = CredentialsLoadedPayload(credential_id=request.credential_id, shard=request.shard)
    return [Change(DeviceCredentialsLoaded, payload)]


def _submit(twin: Twin, request: SubmitCommand, now: datetime) -> list[Change]:
    command_id = request.command_id
    if str(command_id) in twin.commands or str(command_id) in twin.finished:
        return []  # decided already (a redelivered request)
    requested = _about(
        command_id,
        CommandRequested,
        CommandRequestedPayload(
            command_id=command_id, name=request.name, params=request.params, expires_at=request.expires_at
        ),
    )
    if request.expires_at <= now:
        return [requested, _about(command_id, CommandExpired)]
    kind = DEVICE_TYPES[twin.device_type]
    try:
        refused = admin.refusal(twin, request.name)
        if refused is not None:
            raise refused
        if admin.is_admin_command(request.name):
            params = admin.validate_admin(request.name, request.params)
            setting, desired = admin.plan_admin(request.name, params)
        else:
            params = kind.validate(request.name, request.params)
            setting, desired = kind.plan_command(twin, request.name, params)
    except CommandInvalid as invalid:
        rejected = CommandRejectedPayload(
            command_id=command_id, reason=invalid.reason, message=invalid.message
        )
        return [requested, _about(command_id, CommandRejected, rejected)]
    superseded = [
        _about(
            old.command_id,
            CommandSuperseded,
            CommandSupersededPayload(command_id=old.command_id, superseded_by=command_id),
        )
        for old in twin.commands.values()
        if old.setting == setting and old.status == "accepted"  # held, not dispatched yet
    ]
    desired_set = DesiredSetPayload(command_id=command_id, desired=desired, setting=setting)
    changes = [
        requested,
        _about(command_id, CommandAccepted),
        *superseded,
        _about(command_id, admin.ADMIN_SETTINGS.get(setting) or DesiredStateSet, desired_set),
    ]
    if twin.online:
        changes.append(_about(command_id, CommandDispatched))
    return changes


def _converged(kind: DeviceType, command: CommandState, reported: JSON) -> bool:
    if admin.is_admin_command(command.name):
        return admin.admin_converged(command.desired, reported)
    return kind.converged(command.desired, reported)


def _report(twin: Twin, request: ReportState, now: datetime) -> list[Change]:
    """A report records what changed of the keys no newer report carried (``_news``: all of them, unless
    it came after a newer one), naming those it carried unchanged, and brings an offline twin online,
    unless it was sent (the gateway's ``sent_at``) before the twin went offline: the command lane is
    served first, so a device's will (``offline``, when its hub's connection drops) can be decided before
    a report it sent just before, still queued on the telemetry lane; that report must not bring a gone
    device back. Its state is still recorded. (``sent_at`` is the gateway's clock, ``offline_at`` the
    actor's: one machine's, or NTP's few milliseconds apart; a device that reconnects says ``online`` and
    is back regardless.)"""
    if late_report(twin, request):
        return []  # a duplicate, or overtaken whole: never overwrite newer state
    seq, device_time, state = request.device_seq, request.device_time, _news(twin, request)
    changes: list[Change] = []
    in_flight = [c for c in twin.commands.values() if c.status in ("dispatched", "acknowledged")]
    if not twin.online and not _sent_before_offline(twin, request):
        in_flight += _come_online(twin, now, changes)
    changed = {key: value for key, value in state.items() if twin.reported.get(key, _MISSING) != value}
    unchanged = tuple(key for key in state if key not in changed) if len(changed) < len(state) else ()
    report = StateReportedPayload(
        reported=changed, device_seq=seq, device_time=device_time, unchanged=unchanged
    )
    changes.append(Change(StateReported, report))  # even if nothing changed: it advances the seq

    kind = DEVICE_TYPES[twin.device_type]
    reported = {**twin.reported, **changed}
    reason = kind.failure(reported)
    for command in in_flight:
        if reason:
            failed = CommandFailedPayload(
                command_id=command.command_id, reason=reason, message=f"device reported {reason}"
            )
            changes.append(_about(command.command_id, CommandFailed, failed))
        elif command.status == "acknowledged" and _converged(kind, command, reported):
            changes.append(_about(command.command_id, CommandConverged))
    return changes


def _sent_before_offline(twin: Twin, request: ReportState) -> bool:
    """Was the report sent before the twin went offline? (A ``sent_at`` without a zone, which no Hearth
    writer sends, is read as UTC rather than failing the comparison.)"""
    if twin.offline_at is None:
        return False
    sent = request.sent_at if request.sent_at.tzinfo is not None else request.sent_at.replace(tzinfo=UTC)
    return sent < twin.offline_at


def _come_online(twin: Twin, now: datetime, changes: list[Change]) -> list[CommandState]:
    """The device is back: say so and dispatch the commands held for it; returns those commands."""
    changes.append(Change(DeviceCameOnline, ConnectivityPayload(last_seen=now)))
    held = [c for c in twin.commands.values() if c.status == "accepted" and c.expires_at > now]
    changes += [_about(c.command_id, CommandDispatched) for c in held]
    return held


def _availability(twin: Twin, request: ReportAvailability, now: datetime) -> list[Change]:
    """``online`` brings an offline device back (and dispatches what was held for it); ``offline`` (the
    will of a dropped connection) takes an online one offline at once.

    ``online`` from a device the twin has online already says it has (re)connected, maybe where the
    commands dispatched to it did not reach it: right after a shard move, a report through its old
    broker (before that broker reloads, or through the simulator's hub there) brings the twin online and
    its held commands go out on the new broker before the device is subscribed there. So the commands
    dispatched and not yet acknowledged are dispatched again (a device tells a repeat by its
    ``command_id``; the actor decides a second ack as nothing). A redelivered or repeated availability
    message so costs at most a repeat of those commands."""
    changes: list[Change] = []
    if request.online and not twin.online:
        _come_online(twin, now, changes)
    elif request.online:
        sent = [c for c in twin.commands.values() if c.status == "dispatched" and c.expires_at > now]
        changes += [_about(c.command_id, CommandDispatched) for c in sent]
    elif twin.online:
        changes.append(Change(DeviceWentOffline, ConnectivityPayload(last_seen=twin.last_seen or now)))
    return changes


def _credentials(twin: Twin, request: IssueCredentials | RevokeCredentials, now: datetime) -> list[Change]:
    """A device has at most one credential: issuing one revokes the one in force (``rotated``); a revoke
    without one, or a redelivered issue (a credential id in force or revoked already), changes nothing.
    Revoking the credential of an online device takes it offline: the broker drops the connection on its
    reload without publishing the device's will (measured with Mosquitto 2.0.11); a device that has the
    new secret says ``online`` again when it reconnects."""
    if isinstance(request, IssueCredentials) and (
        request.credential_id == twin.credential_id or request.credential_id in twin.revoked_credentials
    ):
        return []
    changes: list[Change] = []
    if twin.credential_id is not None:
        reason = "rotated" if isinstance(request, IssueCredentials) else "revoked"
        revoked = CredentialsRevokedPayload(credential_id=twin.credential_id, reason=reason)
        changes.append(Change(DeviceCredentialsRevoked, revoked))
        if twin.online:  # the broker drops its connection, and Mosquitto sends no will for that
            changes.append(Change(DeviceWentOffline, ConnectivityPayload(last_seen=twin.last_seen or now)))
    if isinstance(request, IssueCredentials):
        issued = CredentialsIssuedPayload(
            credential_id=request.credential_id, password_hash=request.password_hash, issued_at=now
        )
        changes.append(Change(DeviceCredentialsIssued, issued))
    return changes


def _acknowledge(twin: Twin, request: AcknowledgeCommand) -> list[Change]:
    command = twin.commands.get(str(request.command_id))
    if command is None:
        return []  # unknown, or terminal already
    if not request.ok:
        failed = CommandFailedPayload(
            command_id=command.command_id, reason=request.reason or "device_refused", message=request.message
        )
        return [_about(command.command_id, CommandFailed, failed)]
    if command.status != "dispatched":
        return []
    changes = [_about(command.command_id, CommandAcknowledged)]
    if _converged(DEVICE_TYPES[twin.device_type], command, twin.reported):
        changes.append(_about(command.command_id, CommandConverged))
    return changes


def tick(twin: Twin | None, now: datetime, *, offline_after_s: float) -> list[Change]:
    """What the passing of time decides: expired commands, and a device gone silent."""
    if twin is None:
        return []
    changes = [_about(c.command_id, CommandExpired) for c in twin.commands.values() if c.expires_at <= now]
    silent = twin.last_seen is not None and (now - twin.last_seen).total_seconds() > offline_after_s
    if twin.online and silent:
        changes.append(Change(DeviceWentOffline, ConnectivityPayload(last_seen=twin.last_seen)))
    return changes


def stamp(
    twin: Twin | None,
    changes: list[Change],
    *,
    home_id: str,
    device_id: str,
    now: datetime,
    causation_id: uuid.UUID | None,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
) -> list[Event]:
    """Wrap changes in envelopes, numbered on from the twin's version (1 for a new device's first fact)."""
    events: list[Event] = []
    for version, change in enumerate(changes, start=(twin.version if twin else 0) + 1):
        make: Callable[..., Event] = change.event_type
        payload = change.payload
        events.append(
            make(
                event_id=new_id(),
                device_id=device_id,
                home_id=home_id,
                version=version,
                occurred_at=payload.device_time if isinstance(payload, StateReportedPayload) else now,
                recorded_at=now,
                causation_id=causation_id,
                correlation_id=change.correlation_id,
                payload=payload,
            )
        )
    return events
