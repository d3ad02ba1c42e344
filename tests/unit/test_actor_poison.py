"""The device actor's loop with a fake outbox (pure logic): a poison request, or one whose decision
raises, becomes a dead letter with its reason; the rest of the batch is decided and recorded."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from hearth_device_actor.service import actor as actor_module
from hearth_device_actor.service.actor import DeviceActors, InboxRecord
from hearth_shared import domain
from hearth_shared.schema.events import (
    DeviceRegistered,
    RegisterDevice,
    encode,
)
from tests.support.fakes import FakeOutbox

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def registration(device_id: str, name: str = "Hall") -> bytes:
    return encode(
        RegisterDevice(
            request_id=uuid.uuid4(), device_id=device_id, sent_at=NOW, home_id="home-1",
            device_type="thermostat", name=name,
        )
    )  # fmt: skip


def records(*values: bytes) -> list[InboxRecord]:
    return [InboxRecord("inbox", 0, offset, b"k", value) for offset, value in enumerate(values)]


async def test_poison_requests_are_dead_letters_and_the_batch_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_decide = domain.decide  # what the actor module imported

    def decide(twin: Any, request: Any, now: datetime) -> Any:
        if request.device_id == "th-explodes":
            raise ZeroDivisionError("a bug in one decision")
        return real_decide(twin, request, now)

    monkeypatch.setattr(actor_module, "decide", decide)
    outbox = FakeOutbox()
    twins: dict[bytes, bytes] = {}
    actors = DeviceActors(twins, outbox, offline_after_s=60, clock=lambda: NOW)
    await actors.handle_batch(
        records(
            registration("th-1"),
            registration("th-2", name="front\u0000door"),
            b"\x00" * 900_000,
            registration("th-explodes"),
            registration("bad id"),
            registration("th-3"),
        )
    )
    assert sorted(outbox.letters) == [  # unreadable ones first (read before deciding), then the failed
        (1, "unstorable_value"), (2, "too_large"), (3, "decide_failed"), (4, "invalid_identifier"),
    ]  # fmt: skip
    assert [(type(e), e.device_id) for e in outbox.events] == [
        (DeviceRegistered, "th-1"),
        (DeviceRegistered, "th-3"),
    ]
    assert set(twins) == {b"th-1", b"th-3"}
    assert actors.processed == 6
