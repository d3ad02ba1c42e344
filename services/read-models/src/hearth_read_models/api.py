"""The query API's composition root and endpoints: reads only views, never the write path."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response, status
from redis.asyncio import Redis
from sqlalchemy import select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncEngine

from hearth_read_models import session, subscriptions
from hearth_read_models import tables as t
from hearth_read_models.db import async_engine
from hearth_read_models.projector import twin_key
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.auth import Principal, Revocations
from hearth_shared.http import CurrentPrincipal, not_found
from hearth_shared.revocations import RevocationFeed


async def _engine(request: Request) -> AsyncEngine:  # async: no thread-pool hop per request
    engine: AsyncEngine = request.app.state.engine
    return engine


async def _redis(request: Request) -> Redis:
    redis: Redis = request.app.state.redis
    return redis


Engine = Annotated[AsyncEngine, Depends(_engine)]
Cache = Annotated[Redis, Depends(_redis)]

router = APIRouter(prefix="/v1")

READ_YOUR_WRITES = """
**Read-your-writes.** The views trail the journal by a moment. A caller that has just written (registered a
device, sent a command) can ask for a view that includes its write: `min_version=N` (the device's
version, e.g. from a change it saw) or `command_id=C` (a command it sent to this device). The server then
waits, up to `wait_s` seconds (default 5, at most 30), until the view has it, and answers as usual; if it
does not arrive in time the answer is **503** with `Retry-After: 1` and the version the view is at. A device
the caller may not see is 404 after the same wait as a device that does not exist.
"""

MinVersion = Annotated[
    int | None, Query(ge=1, description="Read-your-writes: answer once the view has this device version")
]
AfterCommand = Annotated[
    uuid.UUID | None,
    Query(description="Read-your-writes: answer once the view has this command of the device"),
]
WaitS = Annotated[
    float, Query(ge=0, le=30, description="Seconds to wait for `min_version` / `command_id` (or the command)")
]
Limit = Annotated[int, Query(ge=1, le=1000, description="Items per page")]
After = Annotated[str | None, Query(description="Paging: `next_after` of the previous page")]
POLL_S = 0.05  # how often a read-your-writes wait looks again


async def load_twin(engine: AsyncEngine, redis: Redis, device_id: str) -> dict[str, Any] | None:
    """The latest twin: from the Redis cache when it has it, else from PostgreSQL."""
    cached = await redis.get(twin_key(device_id))
    if cached is not None:
        twin: dict[str, Any] = msgspec.json.decode(cached)
        return twin
    async with engine.connect() as conn:
        row = (await conn.execute(select(t.twins.c.view).where(t.twins.c.device_id == device_id))).first()
    return row.view if row else None


async def visible_twin(
    engine: AsyncEngine, redis: Redis, principal: Principal, device_id: str
) -> dict[str, Any]:
    twin = await load_twin(engine, redis, device_id)
    if twin is None or not principal.may_see(twin["home_id"]):
        raise not_found(f"device {device_id}")
    return twin


async def poll(check: Callable[[], Awaitable[bool]], wait_s: float) -> bool:
    """``check()`` until it is true or ``wait_s`` has passed; its last answer."""
    deadline = asyncio.get_running_loop().time() + wait_s
    while not await check():
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return False
        await asyncio.sleep(min(POLL_S, left))
    return True


async def read_your_writes(
    engine: AsyncEngine,
    principal: Principal,
    device_id: str,
    *,
    min_version: int | None,
    command_id: uuid.UUID | None,
    wait_s: float,
) -> None:
    """Wait until the committed views of ``device_id`` have ``min_version`` and ``command_id``."""
    if min_version is None and command_id is None:
        return
    seen: list[Any] = [None]

    async def arrived() -> bool:
        query = select(t.twins.c.home_id, t.twins.c.version).where(t.twins.c.device_id == device_id)
        async with engine.connect() as conn:
            twin = (await conn.execute(query)).first()
            if twin is None or not principal.may_see(twin.home_id):
                return False
            seen[0] = twin.version
            if command_id is not None:
                known = select(t.commands.c.command_id).where(
                    t.commands.c.command_id == command_id, t.commands.c.device_id == device_id
                )
                if (await conn.execute(known)).first() is None:
                    return False
        return min_version is None or twin.version >= min_version

    if not await poll(arrived, wait_s):
        if seen[0] is None:
            raise not_found(f"device {device_id}")
        wanted = f"version {min_version}" if min_version else f"command {command_id}"
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"the view of device {device_id} is at version {seen[0]} and has not reached {wanted} yet",
            headers={"Retry-After": "1"},
        )


def encode_cursor(*parts: Any) -> str:
    return base64.urlsafe_b64encode("|".join(map(str, parts)).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, parts: int) -> list[str]:
    try:
        values = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split("|", parts - 1)
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "after: not a cursor of this API") from exc
    if len(values) != parts:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "after: not a cursor of this API")
    return values


def page(items: list[Any], limit: int, cursor: Callable[[Any], str]) -> dict[str, Any]:
    return {"items": items, "next_after": cursor(items[-1]) if len(items) == limit else None}


@router.get("/devices", summary="The devices of a home, by device_id, filtered and paged")
async def list_devices(
    principal: CurrentPrincipal,
    engine: Engine,
    home_id: Annotated[str | None, Query(description="Required with an admin token")] = None,
    device_type: Annotated[str | None, Query(alias="type", description="Only devices of this type")] = None,
    online: Annotated[bool | None, Query(description="Only devices online (true) or offline (false)")] = None,
    limit: Limit = 100,
    after: Annotated[str | None, Query(description="Paging: the last device_id of the previous page")] = None,
) -> dict[str, Any]:
    home_id = home_id or principal.home_id
    if home_id is None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "home_id is required with an admin token")
    if not principal.may_see(home_id):
        return {"items": [], "next_after": None}
    twins = t.twins
    query = select(twins.c.view, twins.c.device_id).where(twins.c.home_id == home_id)
    if device_type is not None:
        query = query.where(twins.c.device_type == device_type)
    if online is not None:
        query = query.where(twins.c.online == online)
    if after:
        query = query.where(twins.c.device_id > after)
    async with engine.connect() as conn:
        rows = (await conn.execute(query.order_by(twins.c.device_id).limit(limit))).all()
    return {"items": [r.view for r in rows], "next_after": rows[-1].device_id if len(rows) == limit else None}


@router.get("/devices/{device_id}", summary="A device's twin", description=READ_YOUR_WRITES)
async def get_twin(
    device_id: str,
    principal: CurrentPrincipal,
    engine: Engine,
    cache: Cache,
    min_version: MinVersion = None,
    command_id: AfterCommand = None,
    wait_s: WaitS = 5.0,
) -> dict[str, Any]:
    await read_your_writes(
        engine, principal, device_id, min_version=min_version, command_id=command_id, wait_s=wait_s
    )
    return await visible_twin(engine, cache, principal, device_id)


@router.get(
    "/devices/{device_id}/events",
    summary="A device's history, oldest first, paged by version",
    description=READ_YOUR_WRITES,
)
async def device_events(
    device_id: str,
    principal: CurrentPrincipal,
    engine: Engine,
    cache: Cache,
    after_version: Annotated[int, Query(ge=0, description="Paging: facts after this version")] = 0,
    limit: Limit = 100,
    event_type: Annotated[str | None, Query(alias="type", description="Only facts of this type")] = None,
    min_version: MinVersion = None,
    command_id: AfterCommand = None,
    wait_s: WaitS = 5.0,
) -> dict[str, Any]:
    await read_your_writes(
        engine, principal, device_id, min_version=min_version, command_id=command_id, wait_s=wait_s
    )
    await visible_twin(engine, cache, principal, device_id)
    events = t.device_events
    query = select(events.c.event, events.c.version).where(
        events.c.device_id == device_id, events.c.version > after_version
    )
    if event_type is not None:
        query = query.where(events.c.type == event_type)
    async with engine.connect() as conn:
        rows = (await conn.execute(query.order_by(events.c.version).limit(limit))).all()
    return {
        "items": [r.event for r in rows],
        "next_after_version": rows[-1].version if len(rows) == limit else None,
    }


@router.get(
    "/commands/{command_id}",
    summary="A command's status and its history",
    description="With `wait_s`, a command not in the view yet (just sent) is waited for, up to that long.",
)
async def get_command(
    command_id: uuid.UUID, principal: CurrentPrincipal, engine: Engine, wait_s: WaitS = 0.0
) -> dict[str, Any]:
    found: list[Any] = [None]

    async def known() -> bool:
        async with engine.connect() as conn:
            query = select(t.commands).where(t.commands.c.command_id == command_id)
            found[0] = (await conn.execute(query)).first()
        return found[0] is not None and principal.may_see(found[0].home_id)

    if not await poll(known, wait_s):
        raise not_found(f"command {command_id}")
    data = dict(found[0]._mapping)
    for key in ("requested_at", "expires_at", "updated_at"):
        data[key] = data[key].isoformat()
    return data


@router.get(
    "/alerts", summary="Alerts (anomalies the device actors scored), oldest first, filtered and paged"
)
async def list_alerts(
    principal: CurrentPrincipal,
    engine: Engine,
    home_id: Annotated[str | None, Query(description="A home token sees its own home only")] = None,
    device_id: Annotated[str | None, Query(description="Only this device's alerts")] = None,
    since: Annotated[
        datetime | None, Query(description="Only alerts that occurred at or after this time")
    ] = None,
    limit: Limit = 100,
    after: After = None,
) -> dict[str, Any]:
    home_id = home_id or principal.home_id
    if home_id is not None and not principal.may_see(home_id):
        return {"items": [], "next_after": None}
    alerts = t.alerts
    query = select(alerts)
    if home_id is not None:
        query = query.where(alerts.c.home_id == home_id)
    if device_id is not None:
        query = query.where(alerts.c.device_id == device_id)
    if since is not None:
        query = query.where(alerts.c.occurred_at >= since)
    if after:
        at, event_id = decode_cursor(after, 2)
        query = query.where(tuple_(alerts.c.occurred_at, alerts.c.event_id) > (_time(at), _uuid(event_id)))
    query = query.order_by(alerts.c.occurred_at, alerts.c.event_id).limit(limit)
    async with engine.connect() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(query)]
    return page(rows, limit, lambda r: encode_cursor(r["occurred_at"].isoformat(), r["event_id"]))


@router.get(
    "/devices/{device_id}/rollups",
    summary="A device's telemetry rollups (windowed aggregates), oldest window first, paged",
    description="Each item: the window's record key, its length (`window`), start, and the record's value "
    "as the analytics job wrote it (the newest one for that window).",
)
async def device_rollups(
    device_id: str,
    principal: CurrentPrincipal,
    engine: Engine,
    cache: Cache,
    window: Annotated[str | None, Query(description="Only windows of this length, e.g. 1m or 15m")] = None,
    since: Annotated[datetime | None, Query(description="Only windows starting at or after this")] = None,
    until: Annotated[datetime | None, Query(description="Only windows starting before this")] = None,
    limit: Limit = 100,
    after: After = None,
) -> dict[str, Any]:
    await visible_twin(engine, cache, principal, device_id)
    rollups = t.rollups
    query = select(rollups.c.key, rollups.c.window, rollups.c.window_start, rollups.c.value).where(
        rollups.c.scope == "device", rollups.c.subject_id == device_id
    )
    if window is not None:
        query = query.where(rollups.c.window == window)
    if since is not None:
        query = query.where(rollups.c.window_start >= since)
    if until is not None:
        query = query.where(rollups.c.window_start < until)
    if after:
        start, key = decode_cursor(after, 2)
        query = query.where(tuple_(rollups.c.window_start, rollups.c.key) > (_time(start), key))
    query = query.order_by(rollups.c.window_start, rollups.c.key).limit(limit)
    async with engine.connect() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(query)]
    return page(rows, limit, lambda r: encode_cursor(r["window_start"].isoformat(), r["key"]))


def _time(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "after: not a cursor of this API") from exc


def _uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "after: not a cursor of this API") from exc


def make_app(
    settings: ReadModelSettings | None = None,
    *,
    engine: AsyncEngine | None = None,
    redis: Redis | None = None,
    revocations: Revocations | None = None,
) -> FastAPI:
    settings = settings or ReadModelSettings()
    stack = settings.stack
    revocations = revocations if revocations is not None else Revocations()
    revocation_feed = RevocationFeed(stack.kafka_bootstrap_servers, stack.topics, revocations)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.engine = engine or async_engine(stack.postgres_dsn, settings.schema_name, pool_size=10)
        app.state.redis = redis or Redis.from_url(stack.redis_url)
        await revocation_feed.start()  # tokens revoked anywhere are refused here within a second
        try:
            yield
        finally:
            await revocation_feed.stop()
            if engine is None:
                await app.state.engine.dispose()
            if redis is None:
                await app.state.redis.aclose()

    app = FastAPI(
        title="Hearth query API",
        version="1.0.0",
        description="Twins, command statuses, history, alerts and rollups, projected from the journal.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.token_secret = stack.token_secret
    app.state.revocations = revocations
    app.include_router(router)
    app.include_router(session.router)  # POST /v1/session: the live page's short-lived token
    app.include_router(subscriptions.router)  # WS /v1/subscribe and its hub (in its lifespan), the page at /

    @app.get("/healthz", summary="200 once the API can serve (database and cache answer)")
    async def healthz(request: Request, response: Response) -> dict[str, str]:
        try:
            async with request.app.state.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            await request.app.state.redis.ping()
        except Exception as exc:
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
            return {"status": f"unavailable: {type(exc).__name__}"}
        if not revocation_feed.caught_up.is_set():
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
            return {"status": "catching up with the token revocations"}
        return {"status": "ok"}

    return app
