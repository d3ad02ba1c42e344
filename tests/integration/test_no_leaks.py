"""Another home's device (or command) gives a home token the same answer as one that does not exist, on
every route of both APIs (read from their OpenAPI documents, so a new route is covered when it comes),
and registering never tells whether an id is taken (a home token may not choose ids at all)."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import httpx
import pytest
import websockets

from tests.support.platform import Platform
from tests.support.registration import register_device
from tests.support.waiting import poll_until

pytestmark = pytest.mark.integration

OTHER_ID = str(uuid.uuid4())
COMMAND = {"name": "set_target_temperature", "params": {"target_c": 21.0}}
# A well-formed body for the routes that do not take a command (a malformed one is a 422 before any
# lookup: no leak, but nothing checked either).
BODIES: dict[str, Any] = {
    "/v1/devices/{device_id}/schedule": {"program": []},
    "/v1/devices/{device_id}/quarantine": {"reason": "checked by test_no_leaks"},
    "/v1/devices/{device_id}/shard": {"shard": "0"},
}
# Routes only an admin token may use: a home token gets 403 whether or not the device exists.
ADMIN_ONLY = {"/v1/devices/{device_id}/quarantine", "/v1/devices/{device_id}/shard"}


def answer(response: httpx.Response, *ids: str) -> tuple[int, str]:
    """A response as a stranger sees it, with the ids it was asked about masked."""
    text = response.text
    for i in ids:
        text = text.replace(i, "<id>")
    return response.status_code, text


async def routes_with(client: httpx.AsyncClient, parameter: str) -> list[tuple[str, str]]:
    """(method, path template) of every operation whose path holds ``{parameter}``."""
    document = (await client.get("/openapi.json")).json()
    return [
        (method.upper(), path)
        for path, operations in document["paths"].items()
        if f"{{{parameter}}}" in path
        for method in operations
    ]


async def call(client: httpx.AsyncClient, method: str, path: str, body: Any = None) -> httpx.Response:
    return await client.request(method, path, json=body if method in {"POST", "PUT", "PATCH"} else None)


@pytest.fixture
async def theirs(platform: Platform) -> tuple[str, str, str]:
    """(home, device_id, command_id) of another home, visible in its views."""
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with (
        platform.client(platform.command_api, home) as api,
        platform.client(platform.query_api, home) as query,
    ):
        device_id = await register_device(api, home, "thermostat")
        sent = await api.post(f"/v1/devices/{device_id}/commands", json=COMMAND)
        assert sent.status_code == 202, sent.text
        command_id = sent.json()["command_id"]
        await poll_until(
            lambda: query.get(f"/v1/commands/{command_id}"),
            lambda r: r.status_code == 200,
            f"the other home's command in its views\n{platform.logs()}",
            timeout_s=30,
        )
    return home, device_id, command_id


async def test_another_homes_device_and_command_answer_as_missing_ones_on_every_route(
    platform: Platform, theirs: tuple[str, str, str]
) -> None:
    their_home, their_device, their_command = theirs
    missing_device, missing_command = f"thermostat-{uuid.uuid4().hex[:12]}", str(uuid.uuid4())
    mine = f"home-{uuid.uuid4().hex[:8]}"
    checked = []
    for base in (platform.command_api, platform.query_api):
        async with platform.client(base, mine) as client:
            for parameter, real, missing in (
                ("device_id", their_device, missing_device),
                ("command_id", their_command, missing_command),
            ):
                for method, template in await routes_with(client, parameter):
                    # Any other id in the path (a suggestion's) is one nobody has.
                    path = re.sub(r"\{\w+\}", OTHER_ID, template.replace(f"{{{parameter}}}", "\0"))
                    path = path.replace("\0", "{}")
                    body = BODIES.get(template, COMMAND)
                    seen = answer(await call(client, method, path.format(real), body), real)
                    unknown = answer(await call(client, method, path.format(missing), body), missing)
                    assert seen == unknown, (method, template)
                    assert seen[0] == (403 if template in ADMIN_ONLY else 404), (method, template, seen)
                    checked.append(f"{method} {template}")
            if base == platform.query_api:
                for path, key in (
                    ("/v1/devices", "home_id"),
                    ("/v1/alerts", "home_id"),
                    ("/v1/alerts", "device_id"),
                ):
                    value = their_home if key == "home_id" else their_device
                    other = f"home-{uuid.uuid4().hex[:8]}" if key == "home_id" else missing_device
                    a = await client.get(path, params={key: value})
                    b = await client.get(path, params={key: other})
                    assert answer(a, value) == answer(b, other) and a.status_code == 200, (path, key)
                with_wait = "/v1/devices/{}?min_version=1&wait_s=0.3"
                seen = answer(await client.get(with_wait.format(their_device)), their_device)
                assert seen == answer(await client.get(with_wait.format(missing_device)), missing_device)
    assert {
        "POST /v1/devices/{device_id}/commands",
        "GET /v1/devices/{device_id}",
        "GET /v1/devices/{device_id}/events",
        "GET /v1/devices/{device_id}/rollups",
        "GET /v1/commands/{command_id}",
    } <= set(checked)

    headers = {"Authorization": f"Bearer {platform.token(mine)}"}
    url = platform.query_api.replace("http://", "ws://") + "/v1/subscribe"
    async with websockets.connect(url, additional_headers=headers) as ws:
        await ws.send(json.dumps({"action": "subscribe", "device_ids": [their_device, missing_device]}))
        errors = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(2)]
    assert sorted(e["message"] for e in errors) == sorted(
        f"device {d} not found" for d in (their_device, missing_device)
    )
    assert {e["reason"] for e in errors} == {"not_found"}


async def test_registering_never_tells_a_home_token_whether_an_id_is_taken(
    platform: Platform, admin_api: httpx.AsyncClient, theirs: tuple[str, str, str]
) -> None:
    their_device = theirs[1]
    chosen = f"lock-{uuid.uuid4().hex[:8]}"
    provisioned = {"device_id": chosen, "home_id": theirs[0], "type": "lock", "name": "Door"}
    assert (await admin_api.post("/v1/devices", json=provisioned)).status_code == 201
    mine = f"home-{uuid.uuid4().hex[:8]}"
    async with platform.client(platform.command_api, mine) as api:
        answers = []
        for device_id in (their_device, chosen, f"lock-{uuid.uuid4().hex[:8]}"):
            body = {"device_id": device_id, "home_id": mine, "type": "lock", "name": "Door"}
            answers.append(answer(await api.post("/v1/devices", json=body), device_id))
        assigned = await register_device(api, mine, "lock", name="Door")
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][0] == 422 and "omit device_id" in answers[0][1]
    assert assigned not in {their_device, chosen}
    again = await admin_api.post("/v1/devices", json=provisioned)  # an admin provisions: told it is taken
    assert again.status_code == 409 and "already registered" in again.json()["detail"]
