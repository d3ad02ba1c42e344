"""``WS /v1/subscribe`` (a home's or some devices' twins, then every change, live) and the live page.

``Hub``: one Redis subscription per home channel per process, shared by every local websocket of that
home; the reader fans each message out to a bounded queue per websocket. A websocket whose queue
overflows is closed (4408) instead of slowing the others. A message is decoded (its type, device and
version) and made into the ASGI send message once per process; every websocket sends that same text
(no JSON work per client), and the server declines permessage-deflate (``ws_per_message_deflate``), which
would compress it again for each client. Measured with 1,000 websockets on one process (2026-11-22):
about 40 us of CPU per client per change, of which the socket write is 40 %; before, 120 us (per-client
deflate a fifth of it, ``asyncio.wait_for``'s task per change another fifth).

``Feed``: one websocket. It joins the hub (the Redis subscription is confirmed) before it reads the
current twins, so nothing published after the snapshot is missed. Per device it sends versions
strictly increasing with no gap: a change at or below the last version sent is dropped (the projector
may publish a batch twice after a crash); a change further ahead is preceded by the missing ones from
``device_events``. The projector publishes just before its PostgreSQL commit, so that history may lag
what was seen live by a moment: it is read again, briefly, until it catches up.

Close codes: 4400 bad subscribe message (hearth_read_models.subscribe_message), 4401 no or bad token,
4403 a home the token may not see, 4408 too slow (its queue overflowed, or it did not answer a ping:
hearth_read_models.ws_protocol), 1011 the live feed was lost (subscribe again with ``after``), 1001
shutting down. An ``after`` beyond a device's version is answered with an error message and that device's
snapshot (never silence: the client's version is one the views never had, e.g. from before a reset).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
from fastapi import APIRouter, FastAPI, HTTPException, WebSocket, WebSocketDisconnect
from fastapi.responses import FileResponse
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from sqlalchemy import Text, select
from sqlalchemy.ext.asyncio import AsyncEngine

from hearth_read_models import tables as t
from hearth_read_models.projector import home_channel, twin_key
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.subscribe_message import (
    BAD_REQUEST,
    FEED_LOST,
    FORBIDDEN,
    GOING_AWAY,
    TOO_SLOW,
    UNAUTHORIZED,
    Refused,
    SubscribeRequest,
    bad_request,
    check_size,
    parse_subscribe,
)
from hearth_shared.auth import Principal, Revocations
from hearth_shared.domain import Twin, evolve, twin_view
from hearth_shared.events import decode_event, utcnow
from hearth_shared.http import authenticate, not_found, token_from

log = logging.getLogger(__name__)

FIRST_MESSAGE_S = 30.0  # how long a new websocket may take to say what it subscribes to
CLOSE_S = 30.0  # how long a close frame may wait behind unread data before the socket is given up
CONFIRM_S = 10.0  # how long Redis may take to confirm a subscription
TOKEN_CHECK_S = 1.0  # how often an open websocket looks whether its token was revoked or has expired

_json = msgspec.json.Encoder()


class _Published(msgspec.Struct):
    """What the hub reads of a published change (the rest is passed on as it is)."""

    type: str
    device_id: str
    version: int


_published = msgspec.json.Decoder(_Published)


class Live(NamedTuple):
    kind: str  # "change"; or "snapshot" when a rebuild swapped in new views; or "heartbeat"
    device_id: str
    version: int
    send: dict[str, str]  # the ASGI message that sends it: made once, the same for every websocket


HEARTBEAT = Live("heartbeat", "", 0, {})  # a listener's turn to send a heartbeat


# ------------------------------------------------------------------------------------------------- hub


@dataclass(eq=False)
class Listener:
    """One websocket's share of the hub: the live changes waiting for it, bounded."""

    queue: asyncio.Queue[Live]
    devices: frozenset[str] | None  # None: every device of its homes
    channels: set[str] = field(default_factory=set)
    closing: tuple[int, str] | None = None
    kicked: asyncio.Event = field(default_factory=asyncio.Event)

    def offer(self, live: Live) -> None:
        if self.closing is not None or (self.devices is not None and live.device_id not in self.devices):
            return
        try:
            self.queue.put_nowait(live)
        except asyncio.QueueFull:
            self.kick(TOO_SLOW, f"too slow: more than {self.queue.maxsize} changes waiting to be sent")

    def kick(self, code: int, reason: str) -> None:
        if self.closing is None:
            self.closing = (code, reason)
            self.kicked.set()


class Hub:
    """The process's subscriptions to the home channels: one Redis connection, one reader task."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.channels: dict[str, set[Listener]] = {}
        self.unconfirmed: Counter[str] = Counter()  # SUBSCRIBEs sent that Redis has not confirmed yet
        self.confirmed: dict[str, asyncio.Event] = {}
        self.pubsub: PubSub | None = None
        self.reader: asyncio.Task[None] | None = None
        self.lock = asyncio.Lock()  # orders SUBSCRIBE and UNSUBSCRIBE as the bookkeeping says

    async def join(self, listener: Listener, home_ids: Iterable[str]) -> None:
        """Add ``listener`` to the homes' channels; returns once Redis delivers their messages to us."""
        async with self.lock:
            if self.pubsub is None:
                self.pubsub = self.redis.pubsub()
            new = []
            for channel in map(home_channel, home_ids):
                if channel not in self.channels:
                    new.append(channel)
                    self.unconfirmed[channel] += 1
                    self.confirmed.setdefault(channel, asyncio.Event()).clear()
                self.channels.setdefault(channel, set()).add(listener)
                listener.channels.add(channel)
            if new:
                try:
                    await self.pubsub.subscribe(*new)
                except Exception:
                    self.unconfirmed.subtract(new)  # never sent: no confirmation will come
                    raise
            if self.reader is None:
                self.reader = asyncio.create_task(self._read(self.pubsub))
            waits = [self.confirmed[channel].wait() for channel in listener.channels]
        await asyncio.wait_for(asyncio.gather(*waits), CONFIRM_S)

    async def leave(self, listener: Listener) -> None:
        async with self.lock:
            unused = []
            for channel in listener.channels:
                listeners = self.channels.get(channel, set())
                listeners.discard(listener)
                if not listeners and self.channels.pop(channel, None) is not None:
                    unused.append(channel)
                    if not self.unconfirmed[channel]:
                        self.unconfirmed.pop(channel, None)
                        self.confirmed.pop(channel, None)
            listener.channels.clear()
            if unused and self.pubsub is not None:
                try:
                    await self.pubsub.unsubscribe(*unused)
                except Exception:  # the reader notices a broken connection and starts afresh
                    log.warning("could not unsubscribe from %s", unused, exc_info=True)

    async def stop(self) -> None:
        await self._reset(GOING_AWAY, "the server is shutting down")

    async def _read(self, pubsub: PubSub) -> None:
        try:
            while True:
                message = await pubsub.get_message(timeout=None)
                if message is None:
                    continue
                channel = message["channel"].decode()
                if message["type"] == "message":
                    self._fan_out(channel, message["data"])
                elif message["type"] == "subscribe" and self.unconfirmed[channel]:  # (not a resubscribe)
                    self.unconfirmed[channel] -= 1
                    if not self.unconfirmed[channel]:
                        self.confirmed[channel].set()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the live feed from Redis was lost; closing its subscribers")
            await self._reset(FEED_LOST, "the live feed was interrupted: subscribe again with after")

    def _fan_out(self, channel: str, data: bytes) -> None:
        try:
            published = _published.decode(data)
        except msgspec.DecodeError:
            log.warning("ignored a malformed message on %s", channel)
            return
        if published.type not in ("change", "snapshot"):
            return
        send = {"type": "websocket.send", "text": data.decode()}  # the text as published, for everyone
        live = Live(published.type, published.device_id, published.version, send)
        for listener in tuple(self.channels.get(channel, ())):
            listener.offer(live)

    async def _reset(self, code: int, reason: str) -> None:
        async with self.lock:
            for listeners in self.channels.values():
                for listener in listeners:
                    listener.kick(code, reason)
            self.channels.clear()
            self.unconfirmed.clear()
            self.confirmed.clear()
            pubsub, reader, self.pubsub, self.reader = self.pubsub, self.reader, None, None
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        if pubsub is not None:
            await pubsub.aclose()


# ------------------------------------------------------------------------------------------- the feed


async def load_twins(
    engine: AsyncEngine, redis: Redis, *, home_id: str | None = None, device_ids: Iterable[str] = ()
) -> dict[str, dict[str, Any]]:
    """The current twins of a home (or of some devices): the newer of PostgreSQL's and Redis's."""
    query = select(t.twins.c.device_id, t.twins.c.view)
    ids = list(device_ids)
    query = query.where(t.twins.c.home_id == home_id if home_id else t.twins.c.device_id.in_(ids))
    async with engine.connect() as conn:
        twins: dict[str, dict[str, Any]] = {row.device_id: row.view for row in await conn.execute(query)}
    ids = list(twins) if home_id else ids
    cached = await redis.mget([twin_key(d) for d in ids]) if ids else []
    for device_id, raw in zip(ids, cached, strict=True):
        twin = msgspec.json.decode(raw) if raw else None
        if twin and (device_id not in twins or twin["version"] > twins[device_id]["version"]):
            twins[device_id] = twin
    return twins


async def history(
    engine: AsyncEngine, device_id: str, home_ids: set[str], after: int, upto: int
) -> list[tuple[int, str]]:
    """The change messages of ``device_id`` for versions after ``after`` up to ``upto``, each with the
    twin right after it (folded from the device's first fact, as the projector folded it)."""
    events = t.device_events
    query = (
        select(events.c.version, events.c.event.cast(Text))
        .where(events.c.device_id == device_id, events.c.home_id.in_(home_ids), events.c.version <= upto)
        .order_by(events.c.version)
    )
    changes = []
    twin: Twin | None = None
    async with engine.connect() as conn:
        async for version, text in await conn.stream(query):
            twin = evolve(twin, decode_event(text))
            if version > after:
                message = {
                    "type": "change",
                    "device_id": device_id,
                    "version": version,
                    "twin": twin_view(twin),
                    "event": msgspec.Raw(text),
                }
                changes.append((version, _json.encode(message).decode()))
    return changes


class Feed:
    """One websocket's subscription: current twins (or the changes it missed), then live changes."""

    def __init__(
        self,
        ws: WebSocket,
        listener: Listener,
        *,
        home_ids: set[str],
        home_id: str | None,
        after: dict[str, int],
    ) -> None:
        self.ws = ws
        self.listener = listener
        self.home_ids = home_ids
        self.home_id = home_id  # a home subscription; else the listener's devices
        self.after = after
        self.engine: AsyncEngine = ws.app.state.engine
        self.redis: Redis = ws.app.state.redis
        self.settings: ReadModelSettings = ws.app.state.settings
        self.sent: dict[str, int] = {}  # device_id -> the last version this client has

    async def run(self) -> None:
        twins = await load_twins(
            self.engine, self.redis, home_id=self.home_id, device_ids=self.listener.devices or ()
        )
        for device_id, twin in sorted(twins.items()):
            if twin["home_id"] not in self.home_ids:
                continue
            if device_id in self.after and self.after[device_id] <= twin["version"]:
                await self.catch_up(device_id, twin["version"])
                continue
            if device_id in self.after:  # a version the views never had: say so, then the current state
                await self.error(
                    "after_beyond_version",
                    f"after: {device_id} is at version {twin['version']}, not {self.after[device_id]}; "
                    "its snapshot follows",
                )
            snapshot = {"type": "snapshot", "device_id": device_id, "version": twin["version"]}
            await self.send({**snapshot, "twin": twin})
            self.sent[device_id] = twin["version"]
        await self.live()

    async def live(self) -> None:
        """Send what the hub queued, in order. A timer queues a heartbeat every ``subscribe_heartbeat_s``,
        so waiting for the next change is a bare ``queue.get()`` (no timeout, no task per change)."""
        loop = asyncio.get_running_loop()
        every = self.settings.subscribe_heartbeat_s
        queue = self.listener.queue

        def heartbeat_due() -> None:
            nonlocal timer
            timer = loop.call_later(every, heartbeat_due)
            if not queue.full():  # (a full queue gets its client closed as too slow with the next change)
                queue.put_nowait(HEARTBEAT)

        timer = loop.call_later(every, heartbeat_due)
        try:
            while True:
                live = await queue.get()
                if live is HEARTBEAT:
                    await self.send({"type": "heartbeat", "at": utcnow().isoformat()})
                else:
                    await self.deliver(live)
        finally:
            timer.cancel()

    def last_sent(self, device_id: str) -> int:
        return self.sent.get(device_id, self.after.get(device_id, 0))

    async def deliver(self, live: Live) -> None:
        last = self.last_sent(live.device_id)
        if live.kind == "snapshot":  # the twin as views rebuilt from the journal have it: replaces it
            if live.version >= last:
                await self.ws.send(live.send)
                self.sent[live.device_id] = live.version
            return
        if live.version <= last:
            return  # the client has it (a batch published twice, or sent from the history)
        if live.version > last + 1:
            await self.catch_up(live.device_id, live.version - 1)
        await self.ws.send(live.send)
        self.sent[live.device_id] = live.version

    async def catch_up(self, device_id: str, upto: int) -> None:
        """Send the changes after the last one sent, up to ``upto``, from the history."""
        after = self.last_sent(device_id)
        self.sent[device_id] = after
        if upto <= after:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.subscribe_catchup_s
        try:
            while True:
                changes = await history(self.engine, device_id, self.home_ids, after, upto)
                if (changes and changes[-1][0] >= upto) or loop.time() >= deadline:
                    break
                await asyncio.sleep(0.05)  # published, not committed yet
        except ValueError as exc:  # a history that does not fold (e.g. missing its first fact)
            await self.error("history_unavailable", f"changes of {device_id} up to {upto}: {exc}")
            self.sent[device_id] = upto
            return
        for version, text in changes:
            await self.ws.send_text(text)
            self.sent[device_id] = version

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send_text(_json.encode(message).decode())

    async def error(self, reason: str, message: str) -> None:
        await self.send({"type": "error", "reason": reason, "message": message})


# ------------------------------------------------------------------------------------------- endpoint


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.hub = Hub(app.state.redis)  # the query API's lifespan made app.state.redis first
    try:
        yield
    finally:
        await app.state.hub.stop()


router = APIRouter(lifespan=_lifespan)


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
            check_size(dict(received), limit)
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


# ------------------------------------------------------------------------------------- the live page

STATIC = Path(__file__).parent / "static"


@router.get("/", include_in_schema=False)
async def live_page() -> FileResponse:
    return FileResponse(STATIC / "index.html")


@router.get("/static/{name}", include_in_schema=False)
async def static_file(name: str) -> FileResponse:
    if name not in {path.name for path in STATIC.iterdir()}:
        raise not_found(name)
    return FileResponse(STATIC / name)
