"""One websocket's subscription (``Feed``): the current twins (or the changes it missed), then live
changes from the hub.

It joins the hub (the Redis subscription is confirmed) before it reads the current twins, so nothing
published after the snapshot is missed. Per device it sends versions strictly increasing with no gap: a
change at or below the last version sent is dropped (the projector may publish a batch twice after a
crash); a change further ahead is preceded by the missing ones from ``device_events``. The projector
publishes just before its PostgreSQL commit, so that history may lag what was seen live by a moment: it
is read again, briefly, until it catches up. An ``after`` beyond a device's version is answered with an
error message and that device's snapshot (never silence: the client's version is one the views never
had, e.g. from before a reset).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, NamedTuple

import msgspec
from fastapi import WebSocket
from redis.asyncio import Redis
from sqlalchemy import Text, select
from sqlalchemy.ext.asyncio import AsyncEngine

from hearth_read_models.live.subscription_hub import HEARTBEAT, Listener, Live
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.store import tables as t
from hearth_read_models.store.live_channels import CHANGE, change_message, twin_key
from hearth_shared.domain import Twin, evolve, twin_view
from hearth_shared.schema.events import decode_event, utcnow

_json = msgspec.json.Encoder()


class MissedChange(NamedTuple):
    """A change message read back from the history (a client's catch-up)."""

    version: int
    text: str


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
) -> list[MissedChange]:
    """The change messages of ``device_id`` for versions after ``after`` up to ``upto``, each with the
    twin right after it (folded from the device's first fact, as the projector folded it)."""
    events = t.device_events
    query = (
        select(events.c.version, events.c.event.cast(Text))
        .where(events.c.device_id == device_id, events.c.home_id.in_(home_ids), events.c.version <= upto)
        .order_by(events.c.version)
    )
    changes: list[MissedChange] = []
    twin: Twin | None = None
    async with engine.connect() as conn:
        async for version, text in await conn.stream(query):
            twin = evolve(twin, decode_event(text))
            if version > after:
                message = change_message(CHANGE, device_id, version, twin_view(twin), msgspec.Raw(text))
                changes.append(MissedChange(version, message.decode()))
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

        timers: list[asyncio.TimerHandle] = []  # the one pending

        def heartbeat_due() -> None:
            timers[:] = [loop.call_later(every, heartbeat_due)]
            if not queue.full():  # (a full queue gets its client closed as too slow with the next change)
                queue.put_nowait(HEARTBEAT)

        timers.append(loop.call_later(every, heartbeat_due))
        try:
            while True:
                live = await queue.get()
                if live is HEARTBEAT:
                    await self.send({"type": "heartbeat", "at": utcnow().isoformat()})
                else:
                    await self.deliver(live)
        finally:
            timers[0].cancel()

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
                if (changes and changes[-1].version >= upto) or loop.time() >= deadline:
                    break
                await asyncio.sleep(0.05)  # published, not committed yet
        except ValueError as exc:  # a history that does not fold (e.g. missing its first fact)
            await self.error("history_unavailable", f"changes of {device_id} up to {upto}: {exc}")
            self.sent[device_id] = upto
            return
        for change in changes:
            await self.ws.send_text(change.text)
            self.sent[device_id] = change.version

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send_text(_json.encode(message).decode())

    async def error(self, reason: str, message: str) -> None:
        await self.send({"type": "error", "reason": reason, "message": message})
