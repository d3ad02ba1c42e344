"""Tokens that end, on the real services: revoked (through the admin API or ``hearth token revoke``) or
expired, a token gets 401 on both APIs within seconds and its open websocket is closed 4401; the live
page's link works once and buys a page token that renews itself; a home token cannot revoke."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
import websockets

from hearth_shared.schema.auth import create_token, issue, token_id
from tests.support.live_feed import close_code
from tests.support.platform import SECRET, Platform
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

WITHIN_S = 10.0  # "within seconds": a revocation reaches every process in about one; margin for load


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def statuses(platform: Platform, token: str, home: str) -> tuple[int, int]:
    """What a token gets from each API: (command API, query API), on routes every home token may call."""
    async with httpx.AsyncClient(headers=bearer(token), timeout=30) as client:
        command = await client.post(
            f"{platform.command_api}/v1/devices", json={"home_id": home, "type": "lock", "name": "probe"}
        )
        query = await client.get(f"{platform.query_api}/v1/devices", params={"home_id": home})
    return command.status_code, query.status_code


async def subscribed(platform: Platform, token: str, home: str) -> websockets.ClientConnection:
    ws = await websockets.connect(
        platform.query_api.replace("http://", "ws://") + "/v1/subscribe", additional_headers=bearer(token)
    )
    await ws.send(json.dumps({"action": "subscribe", "home_id": home}))
    return ws


async def test_a_token_revoked_through_the_api_gets_401_everywhere_and_its_websocket_4401(
    platform: Platform, admin_api: httpx.AsyncClient, home: str
) -> None:
    token, other = create_token(SECRET, home_id=home), create_token(SECRET, home_id=home)
    assert await statuses(platform, token, home) == (201, 200)
    ws = await subscribed(platform, token, home)
    try:
        await asyncio.sleep(0.5)  # subscribed and served before the revocation
        revoked = await admin_api.delete(f"/v1/tokens/{token_id(token)}")
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["token_id"] == token_id(token)
        _, code, reason = await close_code(ws, WITHIN_S)
    finally:
        await ws.close()
    assert (code, reason) == (4401, "token revoked")
    await eventually(lambda: _both_refuse(platform, token, home), "401 from both APIs", timeout_s=WITHIN_S)
    await asyncio.sleep(2)  # one process refusing does not mean the other has read the revocation yet
    for _ in range(10):  # new connections each time: every query-API process (2) follows the revocations
        assert await _both_refuse(platform, token, home)
    async with httpx.AsyncClient(headers=bearer(token)) as client:
        refused = await client.get(f"{platform.query_api}/v1/devices", params={"home_id": home})
    assert refused.json()["detail"] == "invalid token: token revoked"
    assert await statuses(platform, other, home) == (201, 200)  # another token of the home still works


async def _both_refuse(platform: Platform, token: str, home: str) -> bool:
    return await statuses(platform, token, home) == (401, 401)


async def test_hearth_token_revoke_on_the_command_line(platform: Platform, home: str) -> None:
    token = create_token(SECRET, home_id=home)
    assert await statuses(platform, token, home) == (201, 200)
    env = {
        **os.environ,
        "HEARTH_KAFKA_BOOTSTRAP_SERVERS": platform.settings.kafka_bootstrap_servers,
        "HEARTH_TOPIC_PREFIX": platform.settings.topic_prefix,
    }
    hearth = str(Path(sys.executable).with_name("hearth"))
    cli = [hearth, "token", "revoke", token, "--reason", "test"]  # the token itself, or its id
    done = await asyncio.to_thread(
        subprocess.run, cli, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"revoked token {token_id(token)}" in done.stderr
    await eventually(lambda: _both_refuse(platform, token, home), "401 from both APIs", timeout_s=WITHIN_S)


async def test_an_expired_token_gets_401_and_its_websocket_4401(platform: Platform, home: str) -> None:
    long_ago = time.time() - 3600
    expired = create_token(SECRET, home_id=home, expires_in=timedelta(minutes=15), now=long_ago)
    assert await statuses(platform, expired, home) == (401, 401)
    async with httpx.AsyncClient(headers=bearer(expired)) as client:
        answer = await client.get(f"{platform.query_api}/v1/devices", params={"home_id": home})
    assert answer.json()["detail"] == "invalid token: token expired"

    ending = create_token(SECRET, home_id=home, expires_in=timedelta(seconds=3))
    ws = await subscribed(platform, ending, home)
    try:
        _, code, reason = await close_code(ws, 3 + WITHIN_S)
    finally:
        await ws.close()
    assert (code, reason) == (4401, "token expired")
    assert await statuses(platform, ending, home) == (401, 401)


async def test_a_home_token_may_not_revoke(platform: Platform, home: str) -> None:
    token = create_token(SECRET, home_id=home)
    async with httpx.AsyncClient(base_url=platform.command_api, headers=bearer(token)) as client:
        refused = await client.delete(f"/v1/tokens/{token_id(token)}")
        bad_id = await client.delete("/v1/tokens/a%7Cb")
    assert refused.status_code == 403 and "admin" in refused.json()["detail"]
    assert bad_id.status_code == 422
    assert await statuses(platform, token, home) == (201, 200)


async def test_a_page_link_buys_one_page_session_that_renews_and_ends_with_the_link(
    platform: Platform, admin_api: httpx.AsyncClient, home: str
) -> None:
    link, claims = issue(SECRET, home_id=home, kind="link")
    assert await statuses(platform, link, home) == (401, 401)  # a link is good for a session only
    async with httpx.AsyncClient(base_url=platform.query_api) as client:
        first = await client.post("/v1/session", headers=bearer(link))
        again = await client.post("/v1/session", headers=bearer(link))
        assert first.status_code == 200, first.text
        assert again.status_code == 401 and "already used" in again.json()["detail"]
        session = first.json()
        assert session["home_id"] == home and 0 < session["renew_after_s"] <= 15 * 60
        page = session["token"]
        assert await statuses(platform, page, home) == (201, 200)
        renewed = await client.post("/v1/session", headers=bearer(page))
        assert renewed.status_code == 200, renewed.text
        assert renewed.json()["token_id"] != session["token_id"]
        assert await statuses(platform, renewed.json()["token"], home) == (201, 200)

        assert (await admin_api.delete(f"/v1/tokens/{claims.jti}")).status_code == 200
        for token in (page, renewed.json()["token"]):  # the link's session ends, with every renewal
            await eventually(
                functools.partial(_both_refuse, platform, token, home),
                "401 from both APIs",
                timeout_s=WITHIN_S,
            )
        assert (await client.post("/v1/session", headers=bearer(page))).status_code == 401


async def test_a_page_session_ends_with_the_token_it_was_made_from(platform: Platform, home: str) -> None:
    token, claims = issue(SECRET, home_id=home, expires_in=timedelta(seconds=4))
    assert claims.exp is not None
    async with httpx.AsyncClient(base_url=platform.query_api) as client:
        opened = await client.post("/v1/session", headers=bearer(token))
        assert opened.status_code == 200, opened.text
        assert datetime.fromisoformat(opened.json()["expires_at"]).timestamp() <= claims.exp
        await asyncio.sleep(max(0.0, claims.exp - time.time()) + 0.5)
        renewed = await client.post("/v1/session", headers=bearer(opened.json()["token"]))
    assert renewed.status_code == 401 and renewed.json()["detail"] == "invalid token: token expired"
