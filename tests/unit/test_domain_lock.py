"""Lock rules: no locking with the door open, a jammed lock refuses commands and fails those in flight."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import Any

import pytest

from hearth_shared.domain import CommandInvalid, CommandState, Twin, decide, evolve, stamp, validate_command
from hearth_shared.schema.events import (
    AcknowledgeCommand,
    CommandAccepted,
    CommandAcknowledged,
    CommandConverged,
    CommandDispatched,
    CommandFailed,
    CommandFailedPayload,
    CommandRejected,
    CommandRejectedPayload,
    CommandRequested,
    DesiredSetPayload,
    DesiredStateSet,
    ReportState,
    StateReported,
    SubmitCommand,
)
from tests.support.inbox_requests import payload_of

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
COMMAND_ID = uuid.uuid4()


def lock(**fields: Any) -> Twin:
    defaults: dict[str, Any] = {
        "device_id": "l1",
        "home_id": "h1",
        "device_type": "lock",
        "name": "Front door",
        "desired": {},
        "reported": {"lock_state": "unlocked", "door": "closed", "battery_pct": 80},
        "version": 3,
        "online": True,
        "last_seen": NOW,
        "updated_at": NOW,
        "last_device_seq": 5,
    }
    return Twin(**{**defaults, **fields})


def in_flight(status: Any, lock_state: str = "locked") -> dict[str, CommandState]:
    command = CommandState(
        command_id=COMMAND_ID,
        name="lock",
        params={},
        setting="lock",
        desired={"lock_state": lock_state},
        status=status,
        expires_at=NOW + timedelta(minutes=1),
        requested_at=NOW,
    )
    return {str(COMMAND_ID): command}


def submit(name: str) -> SubmitCommand:
    return SubmitCommand(
        request_id=uuid.uuid4(),
        device_id="l1",
        sent_at=NOW,
        home_id="h1",
        command_id=uuid.uuid4(),
        name=name,
        params={},
        expires_at=NOW + timedelta(minutes=1),
    )


def report(seq: int, **state: Any) -> ReportState:
    return ReportState(
        request_id=uuid.uuid4(), device_id="l1", sent_at=NOW, device_seq=seq, device_time=NOW, state=state
    )


def test_lock_and_unlock_take_no_params() -> None:
    assert validate_command("lock", "lock", {}) == {}
    with pytest.raises(CommandInvalid) as raised:
        validate_command("lock", "unlock", {"force": True})
    assert raised.value.reason == "invalid_params"


def test_unknown_lock_command() -> None:
    with pytest.raises(CommandInvalid) as raised:
        validate_command("lock", "open_sesame", {})
    assert raised.value.reason == "unknown_command"


def test_lock_desires_locked_and_is_dispatched() -> None:
    changes = decide(lock(), submit("lock"), NOW)
    assert [c.event_type for c in changes] == [
        CommandRequested,
        CommandAccepted,
        DesiredStateSet,
        CommandDispatched,
    ]
    assert payload_of(changes[2], DesiredSetPayload).desired == {"lock_state": "locked"}


def test_cannot_lock_with_the_door_open() -> None:
    changes = decide(lock(reported={"lock_state": "unlocked", "door": "open"}), submit("lock"), NOW)
    assert [c.event_type for c in changes] == [CommandRequested, CommandRejected]
    assert payload_of(changes[1], CommandRejectedPayload).reason == "door_open"


def test_can_unlock_with_the_door_open() -> None:
    changes = decide(lock(reported={"lock_state": "locked", "door": "open"}), submit("unlock"), NOW)
    assert CommandAccepted in [c.event_type for c in changes]


@pytest.mark.parametrize("name", ["lock", "unlock"])
def test_jammed_lock_rejects_every_command(name: str) -> None:
    changes = decide(lock(reported={"lock_state": "jammed", "door": "closed"}), submit(name), NOW)
    assert changes[-1].event_type is CommandRejected
    assert payload_of(changes[-1], CommandRejectedPayload).reason == "device_jammed"


def test_lock_accepts_commands_again_after_reporting_a_good_state() -> None:
    jammed = lock(reported={"lock_state": "jammed", "door": "closed"})
    changes = decide(jammed, report(6, lock_state="unlocked"), NOW)
    events = stamp(jammed, changes, home_id="h1", device_id="l1", now=NOW, causation_id=None)
    unjammed = reduce(evolve, events, jammed)
    assert decide(unjammed, submit("lock"), NOW)[1].event_type is CommandAccepted


@pytest.mark.parametrize("status", ["dispatched", "acknowledged"])
def test_jam_reported_while_a_command_is_in_flight_fails_it(status: str) -> None:
    changes = decide(lock(commands=in_flight(status)), report(6, lock_state="jammed"), NOW)
    assert [c.event_type for c in changes] == [StateReported, CommandFailed]
    assert payload_of(changes[1], CommandFailedPayload).reason == "device_jammed"
    assert changes[1].correlation_id == COMMAND_ID


def test_acknowledged_lock_converges_when_locked_is_reported() -> None:
    twin = lock(commands=in_flight("acknowledged"))
    assert [c.event_type for c in decide(twin, report(6, lock_state="locking"), NOW)] == [StateReported]
    changes = decide(twin, report(6, lock_state="locked"), NOW)
    assert [c.event_type for c in changes] == [StateReported, CommandConverged]


def test_ack_of_an_already_locked_lock_converges_at_once() -> None:
    twin = lock(reported={"lock_state": "locked", "door": "closed"}, commands=in_flight("dispatched"))
    ack = AcknowledgeCommand(
        request_id=uuid.uuid4(), device_id="l1", sent_at=NOW, command_id=COMMAND_ID, ok=True
    )
    assert [c.event_type for c in decide(twin, ack, NOW)] == [CommandAcknowledged, CommandConverged]
