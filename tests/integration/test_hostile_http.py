"""Hostile HTTP input at both APIs' edges, on the real services: what used to answer 500 or 201 and then
stop the projector is now a 4xx that says what is wrong, its body is the one the OpenAPI document gives for
that status, and the platform keeps serving.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import uuid
from typing import Any

import httpx
import pytest

from tests.support.live_feed import register
from tests.support.platform import Platform
from tests.support.waiting import twin_when

pytestmark = pytest.mark.integration

LIMIT = 64 * 1024  # both APIs' default max_body_bytes
NUL, CONTROL = "\u0000", "\u001b"


async def documented(base: str, method: str, path: str, response: httpx.Response) -> None:
    """The response's status is in the operation's OpenAPI responses and its body has that schema's keys."""
    async with httpx.AsyncClient(base_url=base) as client:
        document = (await client.get("/openapi.json")).json()
    responses = document["paths"][path][method]["responses"]
    assert str(response.status_code) in responses, f"{response.status_code} not documented for {path}"
    body = response.json()
    if response.status_code == 422:  # FastAPI's validation shape
        assert isinstance(body["detail"], list) and body["detail"], body
        assert all({"loc", "msg", "type"} <= set(error) for error in body["detail"]), body
    else:
        assert isinstance(body["detail"], str) and body["detail"], body


def error_locations(response: httpx.Response) -> list[list[Any]]:
    return [error["loc"] for error in response.json()["detail"]]


def cursor(*parts: str) -> str:
    return base64.urlsafe_b64encode("|".join(parts).encode()).decode().rstrip("=")


# (what, documented path, path sent, query): each answered 500 before; {device} is a device of the home.
# Paths are sent percent-encoded (the client refuses raw control characters in a URL; the server decodes).
QUERY_API_INPUTS = [
    ("NUL in a device id", "/v1/devices/{device_id}", "/v1/devices/a%00b", {}),
    ("control character in a device id", "/v1/devices/{device_id}", "/v1/devices/a%1Bb", {}),
    ("NUL in a device id (events)", "/v1/devices/{device_id}/events", "/v1/devices/a%00/events", {}),
    ("NUL in a device id (rollups)", "/v1/devices/{device_id}/rollups", "/v1/devices/a%00/rollups", {}),
    ("NUL in ?after", "/v1/devices", "/v1/devices", {"after": f"a{NUL}"}),
    ("NUL in ?type", "/v1/devices", "/v1/devices", {"type": f"thermo{NUL}stat"}),
    ("NUL in ?type (events)", "/v1/devices/{device_id}/events", "/v1/devices/{device}/events", {"type": NUL}),
    ("NUL in ?window", "/v1/devices/{device_id}/rollups", "/v1/devices/{device}/rollups", {"window": NUL}),
    (
        "NUL in a rollups cursor",
        "/v1/devices/{device_id}/rollups",
        "/v1/devices/{device}/rollups",
        {"after": cursor("2026-01-01T00:00:00+00:00", f"k{NUL}")},
    ),
    ("NUL in an alerts cursor", "/v1/alerts", "/v1/alerts", {"after": cursor(NUL, str(uuid.uuid4()))}),
    ("NUL in ?home_id (alerts)", "/v1/alerts", "/v1/alerts", {"home_id": f"h{NUL}"}),
    ("NUL in ?device_id (alerts)", "/v1/alerts", "/v1/alerts", {"device_id": f"d{NUL}"}),
    ("?after=null (alerts)", "/v1/alerts", "/v1/alerts", {"after": "null"}),
]


@pytest.mark.parametrize(("what", "documented_path", "path", "query"), QUERY_API_INPUTS, ids=lambda v: v)
async def test_query_api_refuses_hostile_parameters_with_a_documented_422(
    platform: Platform, home: str, what: str, documented_path: str, path: str, query: dict[str, str]
) -> None:
    device_id = await register(platform, home)
    async with platform.client(platform.query_api, home) as reader:
        await twin_when(reader, device_id, lambda twin: True)
    async with platform.client(platform.query_api, home) as api:
        response = await api.get(path.format(device=device_id), params=query)
    assert response.status_code == 422, f"{what}: {response.status_code} {response.text}"
    await documented(platform.query_api, "get", documented_path, response)
    where = error_locations(response)[0]
    assert where[-1] in {"device_id", "after", "type", "window", "home_id"}, where


async def test_an_admin_listing_devices_without_home_id_gets_a_documented_422(platform: Platform) -> None:
    async with platform.client(platform.query_api) as admin:
        for query in ({"home_id": ""}, {}):
            response = await admin.get("/v1/devices", params=query)
            assert response.status_code == 422, response.text
            assert error_locations(response) == [["query", "home_id"]]
            await documented(platform.query_api, "get", "/v1/devices", response)


async def test_an_empty_home_id_or_after_still_means_none_given(platform: Platform, home: str) -> None:
    """(The live page asks for its first page with ``after=``.)"""
    device_id = await register(platform, home)
    async with platform.client(platform.query_api, home) as reader:
        await twin_when(reader, device_id, lambda twin: True)
    async with platform.client(platform.query_api, home) as api:
        response = await api.get("/v1/devices", params={"home_id": "", "after": ""})
    assert response.status_code == 200, response.text
    assert [twin["device_id"] for twin in response.json()["items"]] == [device_id]


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "set_target_temperature", "params": {"target_c": 21.0}, "expires_in_s": NaN}',
        '{"name": "set_target_temperature", "params": {"target_c": 21.0}, "expires_in_s": Infinity}',
        '{"name": "set_target_temperature", "params": {"target_c": NaN}}',
        '{"name": "set_hvac_mode", "params": {"mode": "heat\\u0000"}}',
        '{"name": "set_hvac_mode", "params": {"mo\\u0000de": "heat"}}',
        '{"name": "set_hvac_\\u0000mode", "params": {"mode": "heat"}}',
    ],
)
async def test_commands_with_non_finite_numbers_or_control_characters_get_a_422(
    platform: Platform, home: str, body: str
) -> None:
    device_id = await register(platform, home)
    async with platform.client(platform.command_api, home) as api:
        response = await api.post(
            f"/v1/devices/{device_id}/commands", content=body, headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 422, response.text
    assert error_locations(response)[0][:2] in (
        ["body", "expires_in_s"],
        ["body", "params"],
        ["body", "name"],
    )
    await documented(platform.command_api, "post", "/v1/devices/{device_id}/commands", response)


async def test_a_device_id_path_outside_the_pattern_is_a_422_on_the_command_api(
    platform: Platform, home: str
) -> None:
    async with platform.client(platform.command_api, home) as api:
        response = await api.post("/v1/devices/a%00b/commands", json={"name": "lock"})
    assert response.status_code == 422 and error_locations(response) == [["path", "device_id"]]


async def test_a_name_with_nul_is_refused_and_the_platform_keeps_projecting(
    platform: Platform, home: str
) -> None:
    """It answered 201, then the projector died on the fact (PostgreSQL text cannot hold NUL), for good."""
    async with platform.client(platform.command_api, home) as api:
        for name in (f"front{NUL}door", "front\ndoor", f"front{CONTROL}[2Jdoor"):
            refused = await api.post("/v1/devices", json={"home_id": home, "type": "lock", "name": name})
            assert refused.status_code == 422, refused.text
            assert error_locations(refused) == [["body", "name"]]
            assert "control characters" in refused.json()["detail"][0]["msg"]
            await documented(platform.command_api, "post", "/v1/devices", refused)
        for home_id in (f"h{NUL}", "h/x", "h+", "", "h" * 65):
            refused = await api.post("/v1/devices", json={"home_id": home_id, "type": "lock", "name": "n"})
            assert refused.status_code == 422, refused.text
        accepted = await api.post(
            "/v1/devices", json={"home_id": home, "type": "lock", "name": "Front door ✓"}
        )
    assert accepted.status_code == 201, accepted.text
    async with platform.client(platform.query_api, home) as reader:
        twin = await twin_when(reader, accepted.json()["device_id"], lambda twin: True)
    assert twin["name"] == "Front door ✓"


def raw_request(base: str, head: str, body_chunks: list[bytes]) -> tuple[httpx.Response, int]:
    """Send ``head``, then body chunks over a plain socket until the server answers; returns the answer and
    how many chunks were sent before it came."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head.encode())
        sent, answer = 0, b""
        sock.settimeout(0.5)
        for chunk in [b"", *body_chunks]:
            try:
                if chunk:
                    sock.sendall(chunk)
                    sent += 1
                answer = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:  # the server answered and closed: it reads no further
                break
            if answer:
                break
        sock.settimeout(30)
        while b"\r\n\r\n" not in answer and (more := sock.recv(65536)):
            answer += more
        head_part, _, body = answer.partition(b"\r\n\r\n")
        lines = head_part.decode().split("\r\n")
        fields = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines[1:])}
        while len(body) < int(fields.get("content-length", "0")) and (more := sock.recv(65536)):
            body += more
    return httpx.Response(int(lines[0].split()[1]), content=body, headers=fields), sent


@pytest.mark.parametrize("api", ["command_api", "query_api"])
async def test_a_declared_body_over_the_limit_is_refused_before_any_of_it_is_sent(
    platform: Platform, api: str
) -> None:
    base = getattr(platform, api)
    path = "/v1/devices" if api == "command_api" else "/v1/alerts"
    method = "POST" if api == "command_api" else "GET"
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {platform.token()}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {100 * LIMIT}\r\n\r\n"
    )
    answer, sent = await asyncio.to_thread(raw_request, base, head, [b"x" * LIMIT] * 100)
    assert answer.status_code == 413, answer.text
    assert sent == 0, f"the server waited for {sent} chunks of the body before it answered"
    assert str(LIMIT) in answer.json()["detail"]
    await documented(base, method.lower(), path, answer)


async def test_a_chunked_body_is_refused_at_the_limit_not_read_whole(platform: Platform, home: str) -> None:
    head = (
        f"POST /v1/devices HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {platform.token(home)}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = 16 * 1024
    chunks = [f"{chunk:x}\r\n".encode() + b" " * chunk + b"\r\n" for _ in range(64)]  # 1 MiB in all
    answer, sent = await asyncio.to_thread(raw_request, platform.command_api, head, chunks)
    assert answer.status_code == 413, answer.text
    assert sent < len(chunks), "the whole body was read"
    await documented(platform.command_api, "post", "/v1/devices", answer)
    async with platform.client(platform.command_api, home) as api:  # and the API still serves
        ok = await api.post("/v1/devices", json={"home_id": home, "type": "lock", "name": "after 413"})
    assert ok.status_code == 201, ok.text
