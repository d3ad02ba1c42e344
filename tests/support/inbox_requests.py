"""Inbox requests made with sensible defaults, as a device or the command API would send them, so a test
names only what it is about; and the payload of a fact, checked to be of the kind a test expects."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, TypeVar

from hearth_shared.schema.events import (
    AcknowledgeCommand,
    RegisterDevice,
    ReportState,
    SubmitCommand,
    new_id,
    utcnow,
)

P = TypeVar("P")


def payload_of(fact: object, kind: type[P]) -> P:
    """The payload of a fact (or a decided change), checked to be a ``kind``."""
    found = getattr(fact, "payload", None)
    assert isinstance(found, kind), f"{fact!r} carries no {kind.__name__}"
    return found


def register_request(
    device_id: str,
    *,
    home_id: str = "home",
    device_type: str = "thermostat",
    name: str | None = None,
    at: datetime | None = None,
) -> RegisterDevice:
    return RegisterDevice(
        request_id=new_id(),
        device_id=device_id,
        sent_at=at or utcnow(),
        home_id=home_id,
        device_type=device_type,
        name=name or device_id,
    )


def report_request(device_id: str, seq: int, *, at: datetime | None = None, **state: Any) -> ReportState:
    at = at or utcnow()
    return ReportState(
        request_id=new_id(), device_id=device_id, sent_at=at, device_seq=seq, device_time=at, state=state
    )


def command_request(
    device_id: str,
    name: str,
    params: dict[str, Any],
    *,
    home_id: str = "home",
    at: datetime | None = None,
    expires_in_s: float = 300.0,
    command_id: uuid.UUID | None = None,
) -> SubmitCommand:
    at = at or utcnow()
    return SubmitCommand(
        request_id=new_id(),
        device_id=device_id,
        sent_at=at,
        home_id=home_id,
        command_id=command_id or uuid.uuid4(),
        name=name,
        params=params,
        expires_at=at + timedelta(seconds=expires_in_s),
    )


def ack_request(
    device_id: str, command_id: uuid.UUID, *, ok: bool = True, reason: str = ""
) -> AcknowledgeCommand:
    return AcknowledgeCommand(
        request_id=new_id(),
        device_id=device_id,
        sent_at=utcnow(),
        command_id=command_id,
        ok=ok,
        reason=reason,
    )
