"""The read models keep that a credential was issued, never its hash (history and live feed alike)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from hearth_read_models.projection.rules import REDACTED, Projection
from hearth_shared.schema.credentials import hash_secret, new_secret
from hearth_shared.schema.events import (
    CredentialsIssuedPayload,
    DeviceCredentialsIssued,
    DeviceRegistered,
    DeviceRegisteredPayload,
    encode,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def envelope(version: int) -> dict[str, Any]:
    return {
        "event_id": uuid.uuid4(),
        "device_id": "lock-1",
        "home_id": "h1",
        "version": version,
        "occurred_at": NOW,
        "recorded_at": NOW,
    }


def test_the_history_and_the_live_feed_never_hold_the_password_hash() -> None:
    password_hash = hash_secret(new_secret())
    registered = DeviceRegistered(
        **envelope(1), payload=DeviceRegisteredPayload(device_type="lock", name="D")
    )
    payload = CredentialsIssuedPayload(credential_id=uuid.uuid4(), password_hash=password_hash, issued_at=NOW)
    issued = DeviceCredentialsIssued(**envelope(2), payload=payload)
    projection = Projection({}, {})
    for event in (registered, issued):
        projection.apply(event, encode(event))  # as read from the journal, hash included
    row = projection.history[-1]
    stored = msgspec.json.decode(row[-1])
    assert stored["type"] == "device.credentials_issued" and row[1] == 2
    assert stored["payload"]["password_hash"] == REDACTED
    assert stored["payload"]["credential_id"] == str(payload.credential_id)
    assert password_hash.encode() not in bytes(projection.changes[-1].event)
    assert projection.twins["lock-1"].credential_id == payload.credential_id  # the twin still knows which
