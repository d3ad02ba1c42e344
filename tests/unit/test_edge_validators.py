"""The pure checks at the APIs' edges: request bodies, cursors, subscribe messages, error bodies, the body
size limit (an ASGI middleware driven here with an in-memory application)."""

from __future__ import annotations

import base64
import json
from collections.abc import MutableMapping
from typing import Any

import pytest
from fastapi import HTTPException
from pydantic import ValidationError

from hearth_command_api.entrypoints.schemas import RegisterDeviceBody, SubmitCommandBody
from hearth_read_models.live.subscribe_message import Refused, parse_subscribe
from hearth_read_models.query.query_params import decode_cursor, encode_cursor
from hearth_shared.web.body_limit import BodySizeLimit
from hearth_shared.web.http_errors import json_safe

pytestmark = pytest.mark.unit


# ------------------------------------------------------------------------------------ command bodies


@pytest.mark.parametrize("name", ["front\u0000door", "front\ndoor", "a\tb", "x\u009b", "\u007f"])
def test_a_device_name_with_control_characters_is_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="control characters"):
        RegisterDeviceBody(home_id="h1", type="lock", name=name)


def test_a_device_name_may_be_any_other_text() -> None:
    assert RegisterDeviceBody(home_id="h1", type="lock", name="Tür vorne ✓ 🚪").name == "Tür vorne ✓ 🚪"


@pytest.mark.parametrize("home_id", ["", "h\u0000", "h\n", "h/x", "h#", "h+", "h|x", "-h", "h" * 65])
def test_home_ids_follow_the_one_pattern(home_id: str) -> None:
    with pytest.raises(ValidationError, match="home_id"):
        RegisterDeviceBody(home_id=home_id, type="lock", name="n")


@pytest.mark.parametrize("expires", [float("nan"), float("inf"), -1.0, 0.0])
def test_expires_in_s_must_be_a_finite_positive_number(expires: float) -> None:
    with pytest.raises(ValidationError, match="expires_in_s"):
        SubmitCommandBody(name="lock", expires_in_s=expires)


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({"target_c": float("nan")}, "target_c"),
        ({"a": [1.0, float("-inf")]}, r"a\[1\]"),
        ({"mode": "heat\u0000"}, "mode"),
        ({"mo\u0000de": "heat"}, "mo\u0000de"),
    ],
)
def test_command_params_must_be_finite_and_without_control_characters(
    params: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValidationError, match=where):
        SubmitCommandBody(name="set_hvac_mode", params=params)


def test_ordinary_command_params_pass() -> None:
    body = SubmitCommandBody(name="set_target_temperature", params={"target_c": 21.5}, expires_in_s=5)
    assert body.params == {"target_c": 21.5}


# ------------------------------------------------------------------------------------------- cursors


def test_a_cursor_decodes_to_what_was_encoded() -> None:
    assert decode_cursor(encode_cursor("2026-01-01T00:00:00+00:00", "k|x"), 2) == [
        "2026-01-01T00:00:00+00:00",
        "k|x",
    ]


@pytest.mark.parametrize(
    "cursor",
    [
        "null",
        "",
        "\u0000",
        base64.urlsafe_b64encode(b"\xff\xfe|x").decode(),
        encode_cursor("only-one-part"),
        encode_cursor("2026-01-01", "k\u0000"),
        encode_cursor("2026\n", "k"),
    ],
)
def test_anything_but_a_cursor_is_a_422_in_the_validation_shape(cursor: str) -> None:
    with pytest.raises(HTTPException) as refused:
        decode_cursor(cursor, 2)
    assert refused.value.status_code == 422
    detail = refused.value.detail
    assert isinstance(detail, list)
    [error] = detail
    assert error["loc"] == ["query", "after"] and "not a cursor" in error["msg"]


# ------------------------------------------------------------------------------- subscribe messages


def text(message: Any) -> dict[str, Any]:
    return {"type": "websocket.receive", "text": json.dumps(message)}


def test_a_subscribe_message_is_read() -> None:
    request = parse_subscribe(text({"action": "subscribe", "home_id": "h1", "after": {"d1": 3}}), 4096)
    assert (request.home_id, request.device_ids, request.after) == ("h1", None, {"d1": 3})


@pytest.mark.parametrize(
    ("received", "says"),
    [
        ({"type": "websocket.receive", "bytes": b"{}"}, "as text"),
        ({"type": "websocket.receive", "text": "x" * 5000}, "too large"),
        ({"type": "websocket.receive", "text": "{"}, "bad subscribe message"),
        (text({"action": "subscribe", "home_id": "h", "device_ids": ["d"]}), "not both"),
        (text({"action": "subscribe", "home_id": "h\u0000"}), "home_id"),
        (text({"action": "subscribe", "home_id": "h\n"}), "home_id"),
        (text({"action": "subscribe", "device_ids": ["ok", "not ok"]}), "device_ids"),
        (text({"action": "subscribe", "home_id": "h", "after": {"d\u001b": 1}}), "after"),
        (text({"action": "subscribe", "home_id": "h", "after": {"d": -1}}), "bad subscribe message"),
    ],
)
def test_anything_else_is_refused_with_4400(received: dict[str, Any], says: str) -> None:
    with pytest.raises(Refused) as refused:
        parse_subscribe(received, 4096)
    assert refused.value.code == 4400 and says in refused.value.message


# ------------------------------------------------------------------------------------- error bodies


def test_json_safe_writes_non_finite_numbers_as_text() -> None:
    value = {"input": float("nan"), "ctx": {"limit": [1.5, float("inf")]}, "ok": "x"}
    assert json_safe(value) == {"input": "nan", "ctx": {"limit": [1.5, "inf"]}, "ok": "x"}
    json.dumps(json_safe(value), allow_nan=False)


# -------------------------------------------------------------------------------- body size limit


class Recorder:
    """An ASGI application that reads the whole body, then answers 200 with its length."""

    def __init__(self) -> None:
        self.chunks_read = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        size, more = 0, True
        while more:
            message = await receive()
            self.chunks_read += 1
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(size).encode()})


async def drive(
    limit: int, chunks: list[bytes], content_length: int | None
) -> tuple[Recorder, int, Any, int]:
    app = Recorder()
    headers = [] if content_length is None else [(b"content-length", str(content_length).encode())]
    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    pending = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    given = 0
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal given
        given += 1
        return pending.pop(0)

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await BodySizeLimit(app, max_bytes=limit)(scope, receive, send)
    body = json.loads(sent[1]["body"]) if sent[0]["status"] == 413 else sent[1]["body"]
    return app, sent[0]["status"], body, given


async def test_a_declared_length_over_the_limit_is_refused_before_anything_is_read() -> None:
    app, status, body, given = await drive(100, [b"x" * 1000], content_length=1000)
    assert (status, app.chunks_read, given) == (413, 0, 0)
    assert body == {"detail": "request body too large: at most 100 bytes are accepted"}


async def test_a_chunked_body_is_refused_at_the_chunk_that_crosses_the_limit() -> None:
    _, status, _, given = await drive(100, [b"x" * 60] * 10, content_length=None)
    assert status == 413 and given == 2  # of ten chunks


async def test_a_body_within_the_limit_reaches_the_application() -> None:
    app, status, body, _ = await drive(100, [b"x" * 50, b"x" * 50], content_length=100)
    assert (status, body, app.chunks_read) == (200, b"100", 2)
