"""``WS /v1/subscribe`` (a home's or some devices' twins, then every change, live): the endpoint, which
authenticates, reads the subscribe message, scopes it, and runs a ``Feed`` (subscription_feed.py) fed by
the process's ``Hub`` (subscription_hub.py); and the live page (page.py).

Close codes: 4400 bad subscribe message (hearth_read_models.live.subscribe_message), 4401 no or bad token,
4403 a home the token may not see, 4408 too slow (its queue overflowed, or it did not answer a ping:
hearth_read_models.live.ws_protocol), 1011 the live feed was lost (subscribe again with ``after``), 1001
shutting down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import msgspec
from fastapi import APIRouter, FastAPI, HTTPException, WebSocket, WebSocketDisconnect

from hearth_read_models.live import page
from hearth_read_models.live.subscribe_message import (
    BAD_REQUEST,
    FEED_LOST,
    FORBIDDEN,
    UNAUTHORIZED,
    Refused,
    SubscribeRequest,
    bad_request,
    check_size,
    parse_subscribe,
)
from hearth_read_models.live.subscription_feed import Feed, load_twins
from hearth_read_models.live.subscription_hub import Hub, Listener
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.schema.auth import Principal, Revocations
from hearth_shared.web.http import authenticate, token_from

log = logging.getLogger(__name__)

FIRST_MESSAGE_S = 30.0  # how long a new websocket may take to say what it subscribes to
CLOSE_S = 30.0  # how long a close frame may wait behind unread data before the socket is given up
TOKEN_CHECK_S = 1.0  # how often an open websocket looks whether its token was revoked or has expired

_json = msgspec.json.Encoder()


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.hub = Hub(app.state.redis)  # the query API's lifespan made app.state.redis first
    try:
        yield
    finally:
        await app.state.hub.stop()


router = APIRouter(lifespan=_lifespan)
router.include_router(page.router)


@router.websocket("/v1/subscribe")
async def subscribe(ws: WebSocket) -> None:
    await ws.accept()  # before any refusal, so that a browser sees the close code and the error
    hub: Hub = ws.app.state.hub
    settings: ReadModelSettings = ws.app.state.settings
    try:
        principal = _principal(ws)
        request = await _first_message(ws, settings.subscribe_max_message_bytes)
        home_id, home_ids, devices = await _scope(ws, principal, request)
    except Refused as refusal:
        await _refuse(ws, refusal)
        return
    except WebSocketDisconnect:
        return
    listener = Listener(asyncio.Queue(settings.subscribe_queue_size), devices)
    watch = asyncio.create_task(_close_when_token_ends(ws.app.state.revocations, principal, listener))
    try:
        await hub.join(listener, home_ids)
    except Exception:
        log.exception("could not subscribe to the live feed of %s", home_ids)
        listener.kick(FEED_LOST, "the live feed is not available: try again")
    else:
        feed = Feed(ws, listener, home_ids=home_ids, home_id=home_id, after=request.after)
        await _serve(feed, settings.subscribe_max_message_bytes)
    finally:
        watch.cancel()
        await hub.leave(listener)
    if listener.closing is not None:
        await _close(ws, *listener.closing)


def _principal(ws: WebSocket) -> Principal:
    token = token_from(ws.headers.get("authorization"), ws.query_params.get("token"))
    try:
        return authenticate(ws.app.state.token_secret, token, ws.app.state.revocations)
    except HTTPException as exc:
        raise Refused(UNAUTHORIZED, "unauthorized", str(exc.detail)) from exc


async def _close_when_token_ends(revocations: Revocations, principal: Principal, listener: Listener) -> None:
    """Look every ``TOKEN_CHECK_S`` whether the token was revoked or has expired; then close 4401."""
    while True:
        reason = revocations.why_ended(principal, time.time())
        if reason is not None:
            listener.kick(UNAUTHORIZED, reason)
            return
        await asyncio.sleep(TOKEN_CHECK_S)


async def _first_message(ws: WebSocket, limit: int) -> SubscribeRequest:
    try:
        received = await asyncio.wait_for(ws.receive(), FIRST_MESSAGE_S)
    except TimeoutError as exc:
        raise bad_request("no subscribe message came") from exc
    if received["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(received.get("code", 1000))
    return parse_subscribe(received, limit)


async def _scope(
    ws: WebSocket, principal: Principal, request: SubscribeRequest
) -> tuple[str | None, set[str], frozenset[str] | None]:
    """(home subscribed to or None, the homes whose channels to join, the devices or None for all)."""
    if request.device_ids is None:
        home_id = request.home_id or principal.home_id
        if home_id is None:
            raise Refused(BAD_REQUEST, "bad_request", "home_id or device_ids is required with an admin token")
        if not principal.may_see(home_id):
            raise Refused(FORBIDDEN, "forbidden", f"this token may not see home {home_id}")
        return home_id, {home_id}, None
    engine, redis = ws.app.state.engine, ws.app.state.redis
    twins = await load_twins(engine, redis, device_ids=set(request.device_ids))
    visible = {d: twin for d, twin in twins.items() if principal.may_see(twin["home_id"])}
    for device_id in sorted(set(request.device_ids) - set(visible)):  # unknown and not yours alike
        await ws.send_text(_json.encode(_error("not_found", f"device {device_id} not found")).decode())
    return None, {twin["home_id"] for twin in visible.values()}, frozenset(visible)


async def _serve(feed: Feed, limit: int) -> None:
    """Run the feed until the client leaves, the feed ends, or the hub kicks it (too slow, ...)."""
    tasks = [
        asyncio.create_task(feed.run()),
        asyncio.create_task(_until_client_leaves(feed.ws, feed.listener, limit)),
        asyncio.create_task(feed.listener.kicked.wait()),
    ]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    failure = next((task.exception() for task in done if not task.cancelled() and task.exception()), None)
    if failure is not None and not isinstance(failure, WebSocketDisconnect):
        log.error("subscription failed", exc_info=failure)
        feed.listener.kick(FEED_LOST, "the subscription failed: subscribe again with after")


async def _until_client_leaves(ws: WebSocket, listener: Listener, limit: int) -> None:
    """Nothing more is expected from the client once subscribed; a message over ``limit`` is a 4400."""
    while (received := await ws.receive())["type"] != "websocket.disconnect":
        try:
            check_size(received, limit)
        except Refused as refusal:
            listener.kick(refusal.code, refusal.message)
            return


def _error(reason: str, message: str) -> dict[str, str]:
    return {"type": "error", "reason": reason, "message": message}


async def _refuse(ws: WebSocket, refusal: Refused) -> None:
    with contextlib.suppress(Exception):
        await ws.send_text(_json.encode(_error(refusal.reason, refusal.message)).decode())
    await _close(ws, refusal.code, refusal.message)


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):  # already gone, or never reading: give the socket up
        await asyncio.wait_for(ws.close(code, reason.encode()[:120].decode(errors="ignore")), CLOSE_S)
