"""The device gateway's edge, without a broker: MQTT topic and payload in, inbox request (or reason) out."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from hearth_device_gateway.service.edge import REQUEST_NAMESPACE, request_id, to_request, translate
from hearth_shared.schema.events import AcknowledgeCommand, MalformedRecord, ReportAvailability, ReportState
from hearth_shared.schema.mqtt import (
    MAX_PAYLOAD_BYTES,
    CommandMessage,
    decode_command,
    encode_message,
    parse_topic,
    shared_subscription,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 23, 12, tzinfo=UTC)
STATE = "hearth/devices/t-1/state"


def state(**fields: object) -> bytes:
    body = {"seq": 5, "at": "2026-11-23T11:59:59+00:00", "state": {"ambient_c": 20.5}} | fields
    return json.dumps(body).encode()


def test_a_report_keeps_the_device_seq_and_clock_and_its_id_comes_from_them() -> None:
    request = to_request(STATE, state(), NOW)
    assert isinstance(request, ReportState)
    assert (request.device_id, request.device_seq, request.state, request.sent_at) == (
        "t-1",
        5,
        {"ambient_c": 20.5},
        NOW,
    )
    assert request.device_time == datetime(2026, 11, 23, 11, 59, 59, tzinfo=UTC)
    again = to_request(STATE, state(), datetime(2026, 11, 23, 13, tzinfo=UTC))  # redelivered later
    assert again.request_id == request.request_id == request_id("t-1", "state", "5")
    assert to_request(STATE, state(seq=6), NOW).request_id != request.request_id


def test_an_acks_report_becomes_the_report_a_state_message_of_its_seq_would_be() -> None:
    command_id = uuid.uuid4()
    body = {"command_id": str(command_id), "result": "ok", "report": json.loads(state(seq=9))}
    message = translate("hearth/devices/t-1/acks", json.dumps(body).encode(), NOW)
    assert isinstance(message.request, AcknowledgeCommand) and message.request.command_id == command_id
    assert message.answer == to_request(STATE, state(seq=9), NOW) and message.refused is None
    for none in ({}, {"report": None}):
        plain = {"command_id": str(command_id), "result": "ok"} | none
        assert translate("hearth/devices/t-1/acks", json.dumps(plain).encode(), NOW).answer is None


@pytest.mark.parametrize(
    ("report", "reason"),
    [
        ({"seq": 1, "at": "2026-11-23T11:59:59+00:00", "state": {}}, "invalid_fields"),
        ({"seq": 1, "at": "2026-11-23T11:59:59", "state": {"a": 1}}, "invalid_fields"),
        ({"seq": 1, "state": {"a": 1}}, "invalid_fields"),
        ("not a report", "invalid_fields"),
    ],
)
def test_a_bad_report_in_an_ack_is_refused_alone_and_the_ack_goes_through(
    report: object, reason: str
) -> None:
    body = {"command_id": str(uuid.uuid4()), "result": "ok", "report": report}
    message = translate("hearth/devices/t-1/acks", json.dumps(body).encode(), NOW)
    assert isinstance(message.request, AcknowledgeCommand) and message.answer is None
    assert message.refused is not None and message.refused.reason == reason
    assert message.refused.detail.startswith("ack report: state")


def test_acks_and_availability() -> None:
    command_id = uuid.uuid4()
    ok = to_request(
        "hearth/devices/t-1/acks", json.dumps({"command_id": str(command_id), "result": "ok"}).encode(), NOW
    )
    assert isinstance(ok, AcknowledgeCommand) and (ok.command_id, ok.ok, ok.reason) == (command_id, True, "")
    body = {"command_id": str(command_id), "result": "failed", "reason": "door_open"}
    failed = to_request("hearth/devices/t-1/acks", json.dumps(body).encode(), NOW)
    assert isinstance(failed, AcknowledgeCommand) and (failed.ok, failed.reason) == (False, "door_open")
    assert failed.request_id != ok.request_id
    for payload, online in ((b"online", True), (b"offline", False)):
        request = to_request("hearth/devices/t-1/availability", payload, NOW)
        assert isinstance(request, ReportAvailability) and request.online is online


ACK_ID = uuid.UUID(int=7)  # a fixed id: a test's parameters are the same in every xdist worker


@pytest.mark.parametrize(
    ("topic", "payload", "reason"),
    [
        (STATE, b"{nope", "invalid_json"),
        (STATE, b"[1, 2]", "invalid_fields"),
        (STATE, state(seq="5"), "invalid_fields"),
        (STATE, state(seq=-1), "invalid_fields"),
        (STATE, state(at="2026-11-23T11:59:59"), "invalid_fields"),  # no UTC offset
        (STATE, state(state={}), "invalid_fields"),
        (STATE, state(state={"x": "a\u0000b"}), "unstorable_value"),
        (STATE, state(extra=1), "invalid_fields"),
        (STATE, b" " * (MAX_PAYLOAD_BYTES + 1), "payload_too_large"),
        ("hearth/devices/t-1/acks", b'{"command_id": "x", "result": "ok"}', "invalid_fields"),
        ("hearth/devices/t-1/acks", b'{"command_id": "%s", "result": "maybe"}' % str(ACK_ID).encode(),
         "invalid_fields"),
        ("hearth/devices/t-1/availability", b"gone", "invalid_availability"),
        ("hearth/devices/t-1/commands", b"{}", "wrong_direction"),
        ("hearth/devices/t-1/other", b"{}", "unknown_topic"),
        ("hearth/devices/-bad/state", state(), "invalid_device_id"),
        ("elsewhere/t-1/state", state(), "unknown_topic"),
    ],
)  # fmt: skip
def test_what_the_edge_refuses_it_says_why(topic: str, payload: bytes, reason: str) -> None:
    with pytest.raises(MalformedRecord) as refused:
        to_request(topic, payload, NOW)
    assert refused.value.reason == reason


def test_topics_and_command_messages() -> None:
    assert parse_topic("hearth/devices/lock-7/commands").channel == "commands"
    assert shared_subscription("gw", "state") == "$share/gw/hearth/devices/+/state"
    message = CommandMessage(command_id=uuid.uuid4(), name="lock", params={}, expires_at=NOW)
    assert decode_command(encode_message(message)) == message


@pytest.mark.parametrize(
    "parts",
    [
        ("t-1", "state", "5"),
        ("lock-9", "acks", "2b9e4c1e-0f0b-4c1e-9a55-2f8e4d1c9b07", "ok"),
        ("dévice", "ü"),
    ],
)
def test_request_ids_are_the_uuid5_of_the_gateways_namespace(parts: tuple[str, ...]) -> None:
    made = request_id(*parts)
    assert made == uuid.uuid5(REQUEST_NAMESPACE, "/".join(parts))
    assert (made.version, made.variant) == (5, uuid.RFC_4122)
