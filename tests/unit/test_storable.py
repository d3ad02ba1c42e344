"""The pure checks behind "no input can stop a consumer": which decoded facts can be stored, which
decoded requests the actor may act on, and dead letters that always fit what a producer may send."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from hearth_shared.adapters.kafka import MAX_DEAD_LETTER_BYTES, VALUE_EXCERPT_BYTES, dead_letter
from hearth_shared.domain.storable import (
    MAX_REQUEST_BYTES,
    decode_fact,
    decode_request,
    fact_problem,
    request_problem,
)
from hearth_shared.schema.events import (
    AcknowledgeCommand,
    AnomalyDetected,
    AnomalyDetectedPayload,
    CommandRejected,
    CommandRejectedPayload,
    CommandRequested,
    CommandRequestedPayload,
    DeviceRegistered,
    DeviceRegisteredPayload,
    Event,
    Inbound,
    MalformedRecord,
    RegisterDevice,
    ReportState,
    StateReported,
    StateReportedPayload,
    SubmitCommand,
    encode,
)

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def fact(cls: type[Event], payload: Any, **envelope: Any) -> Event:
    fields: dict[str, Any] = {
        "event_id": uuid.uuid4(), "device_id": "th-1", "home_id": "home-1", "version": 1,
        "occurred_at": T0, "recorded_at": T0, "payload": payload, **envelope,
    }  # fmt: skip
    return cls(**fields)


def registered(name: str = "Hall", **envelope: Any) -> Event:
    return fact(DeviceRegistered, DeviceRegisteredPayload(device_type="thermostat", name=name), **envelope)


def reported(state: dict[str, Any], seq: int = 1, unchanged: tuple[str, ...] = ()) -> Event:
    payload = StateReportedPayload(reported=state, device_seq=seq, device_time=T0, unchanged=unchanged)
    return fact(StateReported, payload, version=2)


def requested(params: dict[str, Any]) -> Event:
    c = uuid.uuid4()
    payload = CommandRequestedPayload(
        command_id=c, name="set_target_temperature", params=params, expires_at=T0
    )
    return fact(CommandRequested, payload, version=3, correlation_id=c)


def rejected(reason: str) -> Event:
    c = uuid.uuid4()
    payload = CommandRejectedPayload(command_id=c, reason=reason, message="no")
    return fact(CommandRejected, payload, version=4, correlation_id=c)


def reason_of(problem: MalformedRecord | None) -> str | None:
    return problem.reason if problem is not None else None


GOOD_FACTS = [
    registered("Front door, ground floor (café)"),
    reported({"ambient_c": 20.5, "hvac_mode": "heat", "note": "line\\nnot a newline"}),
    reported({"ambient_c": 20.5}, unchanged=("hvac_mode", "target_c")),
    requested({"target_c": 21.5}),
    rejected("out_of_range"),
]


@pytest.mark.parametrize("event", GOOD_FACTS, ids=lambda e: e.type)
def test_storable_facts_pass_with_and_without_their_wire(event: Event) -> None:
    assert fact_problem(event) is None
    assert decode_fact(encode(event)) == event


@pytest.mark.parametrize(
    ("event", "reason", "where"),
    [
        (registered("front\u0000door"), "unstorable_value", "payload.name"),
        (registered("tab\there"), "unstorable_value", "payload.name"),
        (registered("del\x7f"), "unstorable_value", "payload.name"),
        (registered("c1\x85"), "unstorable_value", "payload.name"),
        (reported({"ambient_c": 20.5, "mode": "he\u0000at"}), "unstorable_value", "payload.reported.mode"),
        (reported({"bad\u0000key": 1}), "unstorable_value", "payload.reported.bad"),
        (reported({"big": 2**70}), "unstorable_value", "payload.reported.big"),
        (reported({"nested": {"big": 2**70}}), "unstorable_value", "payload.reported.nested"),
        (reported({"small": -(2**64)}), "unstorable_value", "payload.reported.small"),
        (requested({"target_c": "2\u00001"}), "unstorable_value", "payload.params.target_c"),
        (rejected("out\u0000of_range"), "unstorable_value", "payload.reason"),
        (registered(device_id="front door"), "invalid_identifier", "device_id"),
        (registered(home_id="home/1"), "invalid_identifier", "home_id"),
        (registered(device_id="x" * 65), "invalid_identifier", "device_id"),
        (registered(version=2**63), "out_of_range", "version"),
        (registered(version=0), "out_of_range", "version"),
        (reported({}, seq=2**64), "out_of_range", "device_seq"),
        (reported({}, unchanged=("hvac\u0000mode",)), "unstorable_value", "payload.unchanged"),
    ],
)
def test_unstorable_facts_are_named_with_a_reason(event: Event, reason: str, where: str) -> None:
    problem = fact_problem(event)
    assert reason_of(problem) == reason
    assert problem is not None and where in problem.detail
    with pytest.raises(MalformedRecord) as raised:
        decode_fact(encode(event))  # the wire's fast path finds it too
    assert raised.value.reason == reason


def test_an_alert_whose_model_version_postgres_cannot_hold_is_unstorable() -> None:
    payload = AnomalyDetectedPayload(
        metric="ambient_c", value=35.0, score=5.0, threshold=3.0, model_version=2**31, device_time=T0
    )
    assert reason_of(fact_problem(fact(AnomalyDetected, payload, version=5))) == "out_of_range"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (None, "no_value"),
        (b"", "invalid_json"),
        (b"[" * 100_000 + b"]" * 100_000, "too_deep"),
        (b'{"type": "device.registered", "payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "too_deep"),
        (b'{"type": "device.registered", "version": NaN}', "invalid_json"),
        (b'{"type": "device.registered", "version": 1e999}', "invalid_json"),
        (os.urandom(900 * 1024), "invalid_json"),
        (
            encode(reported({})).replace(b'"device_seq"', b'"unchanged":"hvac_mode","device_seq"'),
            "invalid_fields",
        ),
    ],
    ids=["tombstone", "empty", "deep", "deep-payload", "nan", "inf", "random", "unchanged-not-a-list"],
)
def test_undecodable_journal_records_raise_malformed_record(data: bytes | None, reason: str) -> None:
    with pytest.raises(MalformedRecord) as raised:
        decode_fact(data)
    assert raised.value.reason == reason


# ------------------------------------------------------------------------------------------- requests


def register(**fields: Any) -> Inbound:
    base: dict[str, Any] = {
        "request_id": uuid.uuid4(), "device_id": "th-1", "sent_at": T0, "home_id": "home-1",
        "device_type": "thermostat", "name": "Hall",
    }  # fmt: skip
    return RegisterDevice(**{**base, **fields})


def submit(**fields: Any) -> Inbound:
    base: dict[str, Any] = {
        "request_id": uuid.uuid4(), "device_id": "th-1", "sent_at": T0, "home_id": "home-1",
        "command_id": uuid.uuid4(), "name": "set_target_temperature", "params": {"target_c": 21.5},
        "expires_at": T0 + timedelta(seconds=30),
    }  # fmt: skip
    return SubmitCommand(**{**base, **fields})


def report(state: dict[str, Any], seq: int = 1) -> Inbound:
    return ReportState(
        request_id=uuid.uuid4(), device_id="th-1", sent_at=T0, device_seq=seq, device_time=T0, state=state
    )


def ack(reason: str) -> Inbound:
    return AcknowledgeCommand(
        request_id=uuid.uuid4(),
        device_id="th-1",
        sent_at=T0,
        command_id=uuid.uuid4(),
        ok=False,
        reason=reason,
    )


@pytest.mark.parametrize(
    "request_", [register(), submit(), report({"ambient_c": 20.5, "door": None, "on": True}), ack("jammed")]
)
def test_usable_requests_pass(request_: Inbound) -> None:
    assert request_problem(request_) is None
    assert decode_request(encode(request_)) == request_


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (register(name="front\u0000door"), "unstorable_value"),
        (register(name="bell\x07"), "unstorable_value"),
        (register(device_id="th 1"), "invalid_identifier"),
        (register(home_id="home-1\u0000"), "invalid_identifier"),
        (register(device_type="toaster"), "unknown_device_type"),
        (submit(name="set target"), "invalid_command_name"),
        (submit(params={"target_c": "21\u0000"}), "unstorable_value"),
        (submit(params={"target_c": 2**64}), "unstorable_value"),
        (submit(device_id="-leading-dash"), "invalid_identifier"),
        (report({"ambient_c": {"value": 20.5}}), "wrong_type"),
        (report({"ambient_c": [20.5]}), "wrong_type"),
        (report({"ambient c": 20.5}), "invalid_state"),
        (report({"mode": "he\u0000at"}), "unstorable_value"),
        (report({}, seq=2**63), "out_of_range"),
        (ack("jam\u0000med"), "unstorable_value"),
    ],
)
def test_unusable_requests_are_named_with_a_reason(request_: Inbound, reason: str) -> None:
    assert reason_of(request_problem(request_)) == reason
    with pytest.raises(MalformedRecord) as raised:
        decode_request(encode(request_))
    assert raised.value.reason == reason


def test_an_oversized_request_is_refused_before_it_is_decoded() -> None:
    big = encode(register(name="x" * (MAX_REQUEST_BYTES + 1)))
    with pytest.raises(MalformedRecord) as raised:
        decode_request(big)
    assert raised.value.reason == "too_large"
    assert decode_request(encode(register(name="x" * (MAX_REQUEST_BYTES - 500)))) is not None


# ---------------------------------------------------------------------------------------- dead letters


def test_a_dead_letter_carries_a_bounded_excerpt_and_the_size_of_an_oversized_value() -> None:
    value = os.urandom(900 * 1024)
    letter = dead_letter(
        topic="hearth.inbox", partition=3, offset=41, key=os.urandom(900 * 1024), value=value,
        error=MalformedRecord("invalid_json", "x" * 10_000), consumer="device-actor",
    )  # fmt: skip
    assert (letter.source_topic, letter.partition, letter.offset) == ("hearth.inbox", 3, 41)
    assert (letter.reason, letter.value_size, letter.value_truncated) == ("invalid_json", len(value), True)
    assert letter.value == value[:VALUE_EXCERPT_BYTES].decode(errors="replace")
    assert letter.key is not None and len(letter.key) <= 512 and len(letter.detail) == 2000
    assert len(msgspec.json.encode(letter)) < MAX_DEAD_LETTER_BYTES


def test_the_worst_excerpt_still_fits() -> None:
    """Bytes that each become 6 bytes of JSON (a control character's escape) or 3 (a replaced byte)."""
    for value in (b"\x00" * 900_000, b"\xff" * 900_000):
        letter = dead_letter(
            topic="t", partition=0, offset=0, key=value, value=value, error=ValueError("boom"), consumer="c"
        )
        assert len(msgspec.json.encode(letter)) < MAX_DEAD_LETTER_BYTES
        assert letter.reason == "ValueError"


def test_a_small_value_is_kept_whole_and_a_tombstone_has_no_size() -> None:
    whole = dead_letter(
        topic="t", partition=0, offset=0, key=None, value=b"{not json", error=ValueError(), consumer="c"
    )
    assert (whole.value, whole.value_size, whole.value_truncated, whole.key) == ("{not json", 9, False, None)
    none = dead_letter(
        topic="t", partition=0, offset=1, key=b"k", value=None, error=ValueError(), consumer="c"
    )
    assert (none.value, none.value_size) == ("", -1)
