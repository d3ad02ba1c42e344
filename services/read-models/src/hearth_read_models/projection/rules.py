"""The projection: journal facts -> view rows, as pure single-dispatch handlers over a batch.

``Projection.apply(event)`` folds one fact into the batch's working set (history rows, command rows,
alerts, changed twins); the projector then writes the whole working set and the consumed offsets in one
transaction. ``twins`` and ``commands`` are the projector's caches, kept between batches: they hold the
state before the batch for every device and command in it, and ``apply`` moves them forward. Facts a
view already has (version <= the twin's version) are skipped, so replaying a batch changes nothing.

A projection that tells no subscriber (a rebuild's replay: ``collect_changes`` off) holds a device's
consecutive state reports back and folds them into its twin at once (``reports_folded``: the twin
``evolve`` of each gives), when another fact of the device comes or at ``settle()``, which the
projector calls before it reads the twins: nine facts in ten are state reports, and a device's reports
of a batch are folded with one twin built instead of one each.

Rollup records (the rollups topic, not the journal) are parsed by ``rollup_row``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import singledispatch
from typing import Any, NamedTuple

import msgspec

from hearth_shared.domain import Twin, encode_twin, evolve, older_key_seqs, reports_folded, twin_view
from hearth_shared.schema.events import (
    COMMAND_STATUS_BY_EVENT,
    EVENT_TYPES,
    RETIRED_INTO,
    AnomalyDetected,
    CommandFailed,
    CommandRejected,
    CommandRequested,
    DeviceCredentialsIssued,
    DeviceRegistered,
    Event,
    MalformedRecord,
    StateReported,
    encode,
    fact_type,
    status_reached,
    wire_name,
)
from hearth_shared.schema.ids import find_unstorable, has_control_characters

_json = msgspec.json.Encoder()


class HistoryRow(NamedTuple):
    """A device_events row, COPYed in PostgreSQL's binary format (``HISTORY_TYPES``): the envelope as
    decoded (its ``type`` as on the wire: a retired fact keeps its name), and the fact as on the wire (json's
    binary form is its text)."""

    device_id: str
    version: int
    event_id: uuid.UUID
    type: str
    home_id: str
    occurred_at: datetime
    recorded_at: datetime
    correlation_id: uuid.UUID | None
    event: bytes


class AlertRow(NamedTuple):
    event_id: uuid.UUID
    device_id: str
    home_id: str
    version: int
    kind: str
    metric: str
    value: float
    score: float
    threshold: float
    model_version: int
    occurred_at: datetime


class TwinRow(NamedTuple):
    """A twins row: the view as JSON text, the state as msgpack."""

    device_id: str
    home_id: str
    device_type: str
    name: str
    version: int
    online: bool
    view: str
    state: bytes
    updated_at: datetime


class RollupRow(NamedTuple):
    key: str
    scope: str
    subject_id: str
    window: str
    window_start: datetime
    value: str


# Column orders of the rows (the projector COPYs them in this order): the rows' own field names.
HISTORY_COLUMNS = HistoryRow._fields
HISTORY_TYPES = ("text", "int8", "uuid", "text", "text", "timestamptz", "timestamptz", "uuid", "bytea")
ALERT_COLUMNS = AlertRow._fields
TWIN_COLUMNS = TwinRow._fields
ROLLUP_COLUMNS = RollupRow._fields


@dataclass(slots=True)
class Change:
    """One fact as a live subscriber sees it: the twin right after it, and the fact as on the wire."""

    home_id: str
    device_id: str
    version: int
    twin: dict[str, Any]
    event: msgspec.Raw


@dataclass(slots=True)
class HeldReports:
    """A device's state reports held back in a batch: its twin before them, their states merged over the
    twin's, the twin's ``older_key_seqs`` after them, the highest sequence, the latest."""

    twin: Twin
    reported: dict[str, Any]
    older: dict[str, int]
    device_seq: int
    last: StateReported


@dataclass
class Projection:
    """The working set of one batch. With ``collect_changes``, every applied fact also yields a ``Change``
    for the subscribers; a rebuild has none to tell and skips that work (the view too)."""

    twins: dict[str, Twin]
    commands: dict[uuid.UUID, dict[str, Any]]
    collect_changes: bool = True
    changed_twins: set[str] = field(default_factory=set)
    changed_commands: set[uuid.UUID] = field(default_factory=set)
    history: list[HistoryRow] = field(default_factory=list)
    alerts: list[AlertRow] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    skipped: int = 0
    held: dict[str, HeldReports] = field(default_factory=dict)  # without collect_changes: by device

    def apply(self, event: Event, wire: bytes | None = None) -> None:
        """Fold one fact in (``wire``: its record as read, else it is encoded again); a fact that cannot
        be (no twin yet) raises ``MalformedRecord``, changing nothing."""
        device_id, version, cls = event.device_id, event.version, type(event)
        if not self.collect_changes:
            if isinstance(event, StateReported):
                self._hold(event, wire)
                return
            if device_id in self.held:
                self._fold_held(device_id)
        twin = self.twins.get(device_id)
        if twin is None:
            if not isinstance(event, DeviceRegistered):
                raise _unknown_device(event)
        elif version <= twin.version:
            self.skipped += 1  # already projected (a replayed batch, or a fact recorded twice)
            return
        twin = evolve(twin, event)  # what can fail runs before anything of the batch changes
        view = twin_view(twin) if self.collect_changes else None
        if isinstance(event, DeviceCredentialsIssued):  # the views say a credential was issued, not its hash
            wire = encode(_without_hash(event))
        wire = wire or encode(event)
        self.twins[device_id] = twin
        self.changed_twins.add(device_id)
        # A retired fact (``RETIRED_SETTING_FACTS``) was upcast when read: its row keeps the name on the
        # wire, so a rebuild writes the rows the live projector wrote before the fact was retired.
        name = fact_type(wire) if cls in RETIRED_INTO else _WIRE_NAMES[cls]
        self.history.append(
            _new_row(HistoryRow, (device_id, version, event.event_id, name, event.home_id,
                     event.occurred_at, event.recorded_at, event.correlation_id, wire))
        )  # fmt: skip
        if view is not None:
            self.changes.append(Change(event.home_id, device_id, version, view, msgspec.Raw(wire)))
        handler = _handlers.get(cls, _handler)
        if handler is not None:
            handler(event, self)

    def _hold(self, event: StateReported, wire: bytes | None) -> None:
        """A state report into its device's held reports (``apply`` without collect_changes)."""
        device_id, version = event.device_id, event.version
        held = self.held.get(device_id)
        if held is None:
            twin = self.twins.get(device_id)
            if twin is None:
                raise _unknown_device(event)
            if version <= twin.version:
                self.skipped += 1
                return
            held = HeldReports(twin, dict(twin.reported), twin.older_key_seqs, twin.last_device_seq, event)
            self.held[device_id] = held
        elif version <= held.last.version:
            self.skipped += 1
            return
        payload = event.payload
        held.older = older_key_seqs(held.older, held.reported, held.device_seq, payload)
        held.reported.update(payload.reported)
        if payload.device_seq > held.device_seq:
            held.device_seq = payload.device_seq
        held.last = event
        self.changed_twins.add(device_id)
        self.history.append(
            _new_row(HistoryRow, (device_id, version, event.event_id, _STATE_REPORTED, event.home_id,
                     event.occurred_at, event.recorded_at, event.correlation_id, wire or encode(event)))
        )  # fmt: skip

    def _fold_held(self, device_id: str) -> None:
        held = self.held.pop(device_id)
        self.twins[device_id] = reports_folded(
            held.twin, held.last, held.reported, held.older, held.device_seq
        )

    def settle(self) -> None:
        """Fold every device's held state reports into its twin: ``twins`` is then up to date."""
        for device_id in list(self.held):
            self._fold_held(device_id)

    def command_status(self, event: Event, *, reason: str | None, message: str | None) -> None:
        status = COMMAND_STATUS_BY_EVENT[type(event)]
        row = self.commands.get(event.correlation_id) if event.correlation_id else None
        if row is None or status_reached(row["status"], status):
            return
        row["status"] = status
        row["reason"] = reason or row["reason"]
        row["message"] = message or row["message"]
        row["updated_at"] = event.recorded_at
        row["history"] = [*row["history"], _step(status, event.recorded_at, event.version, reason)]
        self.changed_commands.add(row["command_id"])


def _unknown_device(event: Event) -> MalformedRecord:
    return MalformedRecord(
        "unknown_device", f"{event.type} v{event.version} of {event.device_id} before device.registered"
    )


def _without_hash(event: DeviceCredentialsIssued) -> DeviceCredentialsIssued:
    """The fact as the views keep it: the device's password hash is the broker's business only (the
    broker-access follower reads it from the journal), never a home's history or live feed."""
    payload = msgspec.structs.replace(event.payload, password_hash=REDACTED)
    return msgspec.structs.replace(event, payload=payload)


REDACTED = "(redacted)"


@singledispatch
def project(event: Event, p: Projection) -> None:
    """The views of one fact beyond its twin and its history; by default, a command status fact moves
    its command (if any)."""
    if type(event) in COMMAND_STATUS_BY_EVENT:
        p.command_status(event, reason=None, message=None)


@project.register
def _(event: CommandRequested, p: Projection) -> None:
    c = event.payload
    if c.command_id in p.commands:
        return
    p.commands[c.command_id] = {
        "command_id": c.command_id,
        "device_id": event.device_id,
        "home_id": event.home_id,
        "name": c.name,
        "params": c.params,
        "status": "pending",
        "reason": None,
        "message": None,
        "requested_at": event.occurred_at,
        "expires_at": c.expires_at,
        "updated_at": event.recorded_at,
        "history": [_step("pending", event.recorded_at, event.version)],
    }
    p.changed_commands.add(c.command_id)


@project.register
def _(event: CommandRejected, p: Projection) -> None:
    p.command_status(event, reason=event.payload.reason, message=event.payload.message)


@project.register
def _(event: CommandFailed, p: Projection) -> None:
    p.command_status(event, reason=event.payload.reason, message=event.payload.message)


@project.register
def _(event: AnomalyDetected, p: Projection) -> None:
    a = event.payload
    p.alerts.append(
        AlertRow(event.event_id, event.device_id, event.home_id, event.version, "anomaly", a.metric, a.value,
         a.score, a.threshold, a.model_version, event.occurred_at)
    )  # fmt: skip


_WIRE_NAMES = {cls: wire_name(cls) for cls in EVENT_TYPES}
_STATE_REPORTED = _WIRE_NAMES[StateReported]
_new_row = tuple.__new__  # a row without the generated ``__new__``'s Python call (the fields in order)


def _handler(event: Event, p: Projection) -> None:
    """``project``'s handler for the fact's type, looked up once per type (singledispatch's own lookup is
    slow on the hot path); a type with nothing to project beyond its twin and history gets None and is
    not called at all (most facts: state reports)."""
    cls = type(event)
    handler = project.dispatch(cls)
    if handler is project.dispatch(object) and cls not in COMMAND_STATUS_BY_EVENT:
        _handlers[cls] = None
        return
    _handlers[cls] = handler
    handler(event, p)


_handlers: dict[type[Event], Callable[[Any, Projection], None] | None] = {}


def twin_row(twin: Twin) -> TwinRow:
    """A twin as a ``TwinRow``: the view as JSON text, the state as msgpack."""
    view = _json.encode(twin_view(twin)).decode()
    return TwinRow(twin.device_id, twin.home_id, twin.device_type, twin.name, twin.version, twin.online, view,
            encode_twin(twin), twin.updated_at)  # fmt: skip


def _step(status: str, at: datetime, version: int, reason: str | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"status": status, "at": at.isoformat(), "version": version}
    if reason:
        step["reason"] = reason
    return step


def command_ids(events: list[Event]) -> set[uuid.UUID]:
    """The commands a batch touches (their rows are loaded before the batch is applied)."""
    return {e.correlation_id for e in events if e.correlation_id and type(e) in COMMAND_STATUS_BY_EVENT}


def rollup_row(key: bytes | None, value: bytes) -> RollupRow:
    """A rollup record as a ``RollupRow``. The key names the window,
    ``{scope}:{id}:{window_len}:{window_start_iso}``; the value (a JSON object) is kept as it came."""
    try:
        text = (key or b"").decode()
        scope, subject_id, window, start = text.split(":", 3)
        window_start = datetime.fromisoformat(start)
    except ValueError as exc:
        raise MalformedRecord("invalid_rollup_key", f"{key!r}: {exc}") from exc
    if has_control_characters(text):
        raise MalformedRecord("invalid_rollup_key", f"{text!r:.200} holds a NUL or control character")
    try:
        decoded = msgspec.json.decode(value)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise MalformedRecord("invalid_rollup_value", str(exc) or "JSON nested too deeply") from exc
    if not isinstance(decoded, dict):
        raise MalformedRecord("invalid_rollup_value", "expected a JSON object")
    where = find_unstorable(decoded)
    if where is not None:
        raise MalformedRecord("invalid_rollup_value", f"{where} cannot be stored (NUL, control character)")
    if window_start.tzinfo is None:
        window_start = window_start.replace(tzinfo=UTC)
    return RollupRow(text, scope, subject_id, window, window_start, value.decode())
