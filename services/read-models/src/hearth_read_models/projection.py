"""The projection: journal facts -> view rows, as pure single-dispatch handlers over a batch.

``Projection.apply(event)`` folds one fact into the batch's working set (twins, history rows, command
rows, alerts); the projector then writes the whole working set and the consumed offsets in one
transaction. Facts a view already has (version <= the twin's version) are skipped, so replaying a
batch twice changes nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from functools import singledispatchmethod
from typing import Any

import msgspec

from hearth_shared.domain import Twin, evolve, twin_view
from hearth_shared.events import (
    COMMAND_STATUS_BY_EVENT,
    AnomalyDetected,
    CommandFailed,
    CommandRejected,
    CommandRequested,
    Event,
    status_reached,
    to_builtins,
)

encode_twin = msgspec.msgpack.Encoder().encode
decode_twin = msgspec.msgpack.Decoder(Twin).decode


@dataclass(slots=True)
class Change:
    """One fact as a live subscriber sees it: the twin right after it."""

    home_id: str
    device_id: str
    version: int
    twin: dict[str, Any]
    event: dict[str, Any]


@dataclass
class Projection:
    """The working set of one batch. ``twins`` holds the state before the batch for every device in it
    (loaded by the projector); ``apply`` moves them forward."""

    twins: dict[str, Twin | None]
    commands: dict[uuid.UUID, dict[str, Any]] = field(default_factory=dict)  # loaded + new rows
    changed_twins: set[str] = field(default_factory=set)
    changed_commands: set[uuid.UUID] = field(default_factory=set)
    history: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    skipped: int = 0

    def apply(self, event: Event) -> None:
        twin = self.twins.get(event.device_id)
        if twin is not None and event.version <= twin.version:
            self.skipped += 1  # already projected (a replayed batch, or a fact recorded twice)
            return
        twin = evolve(twin, event)
        self.twins[event.device_id] = twin
        self.changed_twins.add(event.device_id)
        wire = to_builtins(event)
        self.history.append(
            {
                "device_id": event.device_id,
                "version": event.version,
                "event_id": event.event_id,
                "type": event.type,
                "home_id": event.home_id,
                "occurred_at": event.occurred_at,
                "recorded_at": event.recorded_at,
                "correlation_id": event.correlation_id,
                "event": wire,
            }
        )
        self.changes.append(Change(event.home_id, event.device_id, event.version, twin_view(twin), wire))
        self.project(event)

    @singledispatchmethod
    def project(self, event: Event) -> None:
        """Facts with no view of their own beyond the twin and its history."""
        if type(event) in COMMAND_STATUS_BY_EVENT:
            self._command_status(event, reason=None, message=None)

    @project.register
    def _(self, event: CommandRequested) -> None:
        p = event.payload
        row = self.commands.get(p.command_id)
        if row is not None:
            return
        self.commands[p.command_id] = {
            "command_id": p.command_id,
            "device_id": event.device_id,
            "home_id": event.home_id,
            "name": p.name,
            "params": p.params,
            "status": "pending",
            "reason": None,
            "message": None,
            "requested_at": event.occurred_at,
            "expires_at": p.expires_at,
            "updated_at": event.recorded_at,
            "history": [_step("pending", event.recorded_at, event.version)],
        }
        self.changed_commands.add(p.command_id)

    @project.register
    def _(self, event: CommandRejected) -> None:
        self._command_status(event, reason=event.payload.reason, message=event.payload.message)

    @project.register
    def _(self, event: CommandFailed) -> None:
        self._command_status(event, reason=event.payload.reason, message=event.payload.message)

    @project.register
    def _(self, event: AnomalyDetected) -> None:
        p = event.payload
        self.alerts.append(
            {
                "event_id": event.event_id,
                "device_id": event.device_id,
                "home_id": event.home_id,
                "version": event.version,
                "kind": "anomaly",
                "metric": p.metric,
                "value": p.value,
                "score": p.score,
                "threshold": p.threshold,
                "model_version": p.model_version,
                "occurred_at": event.occurred_at,
            }
        )

    def _command_status(self, event: Event, *, reason: str | None, message: str | None) -> None:
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


def _step(status: str, at: datetime, version: int, reason: str | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"status": status, "at": at.isoformat(), "version": version}
    if reason:
        step["reason"] = reason
    return step


def command_ids(events: list[Event]) -> set[uuid.UUID]:
    """The commands a batch touches (their rows are loaded before the batch is applied)."""
    return {e.correlation_id for e in events if e.correlation_id and type(e) in COMMAND_STATUS_BY_EVENT}
