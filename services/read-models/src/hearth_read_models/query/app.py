"""The query API's composition root and endpoints: reads only views, never the write path."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response, status
from pydantic import BaseModel, Field
from redis.asyncio import Redis
from sqlalchemy import select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncEngine

from hearth_read_models.live import session, subscriptions
from hearth_read_models.query import (
    automation_views,
    backtest_views,
    campaign_views,
    runtime_views,
    schedule_views,
    suggestion_views,
    type_schemas,
)
from hearth_read_models.query.journal_ends import JournalEnds
from hearth_read_models.query.query_params import (
    AfterCommand,
    AfterDevice,
    AfterVersion,
    Cursor,
    DeviceId,
    DeviceIdFilter,
    DeviceTypeFilter,
    FactTypeFilter,
    HomeIdFilter,
    Limit,
    MinVersion,
    WaitS,
    WindowFilter,
    cursor_time,
    cursor_uuid,
    decode_cursor,
    encode_cursor,
    page,
)
from hearth_read_models.query.reads import poll, read_your_writes, visible_twin
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.store import tables as t
from hearth_read_models.store.db import async_engine
from hearth_shared.adapters.revocations import RevocationFeed
from hearth_shared.schema.auth import Revocations
from hearth_shared.web.http import CurrentPrincipal, not_found
from hearth_shared.web.http_errors import error_responses, install_edge, unprocessable


async def _engine(request: Request) -> AsyncEngine:  # async: no thread-pool hop per request
    engine: AsyncEngine = request.app.state.engine
    return engine


async def _redis(request: Request) -> Redis:
    redis: Redis = request.app.state.redis
    return redis


async def _journal_ends(request: Request) -> JournalEnds:
    ends: JournalEnds = request.app.state.journal_ends
    return ends


Engine = Annotated[AsyncEngine, Depends(_engine)]
Cache = Annotated[Redis, Depends(_redis)]
Ends = Annotated[JournalEnds, Depends(_journal_ends)]

router = APIRouter(prefix="/v1")

READ_YOUR_WRITES = """
**Read-your-writes.** The views trail the journal by a moment. A caller that has just written (registered a
device, sent a command) or been told something (a command's status) can ask for a view that includes it:

- `min_version=N`: the twin is at version N or later. The command API's command answers carry
  `twin_version`, the version at which the command reached the status they report: with
  `min_version=<twin_version>`, a read after `converged` shows the state the device converged to.
- `command_id=C` (a command sent to this device): the view knows the command, and holds every fact the
  device's journal had when this read arrived. So it holds the command in at least the status any
  answer given before this read reported (after `?wait=converged`: `converged`), and the twin as of that
  status, or later. It costs the server one question to the broker per read.

Both together: both hold. The server waits, up to `wait_s` seconds (default 5, at most 30), until the view
has it, and answers as usual; if it does not arrive in time the answer is **503** with `Retry-After: 1`
and the version the view is at (also when the broker does not say where the journal ends). A device
the caller may not see is 404 after the same wait as a device that does not exist.
"""


@router.get(
    "/devices",
    summary="The devices of a home, by device_id, filtered and paged",
    description="`home_id` is required with an admin token; a home token sees its own home only.",
    responses=error_responses(401, 413),
)
async def list_devices(
    principal: CurrentPrincipal,
    engine: Engine,
    home_id: HomeIdFilter = None,
    device_type: DeviceTypeFilter = None,
    online: Annotated[bool | None, Query(description="Only devices online (true) or offline (false)")] = None,
    limit: Limit = 100,
    after: AfterDevice = None,
) -> dict[str, Any]:
    home_id = home_id or principal.home_id
    if home_id is None:
        raise unprocessable(("query", "home_id"), "missing", "home_id is required with an admin token")
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


@router.get(
    "/devices/{device_id}",
    summary="A device's twin",
    description=READ_YOUR_WRITES,
    responses=error_responses(401, 404, 413, 503),
)
async def get_twin(
    device_id: DeviceId,
    principal: CurrentPrincipal,
    engine: Engine,
    cache: Cache,
    ends: Ends,
    min_version: MinVersion = None,
    command_id: AfterCommand = None,
    wait_s: WaitS = 5.0,
) -> dict[str, Any]:
    await read_your_writes(
        engine, principal, device_id, min_version=min_version, command_id=command_id, wait_s=wait_s, ends=ends
    )
    return await visible_twin(engine, cache, principal, device_id)


@router.get(
    "/devices/{device_id}/events",
    summary="A device's history, oldest first, paged by version",
    description=READ_YOUR_WRITES,
    responses=error_responses(401, 404, 413, 503),
)
async def device_events(
    device_id: DeviceId,
    principal: CurrentPrincipal,
    engine: Engine,
    cache: Cache,
    ends: Ends,
    after_version: AfterVersion = 0,
    limit: Limit = 100,
    event_type: FactTypeFilter = None,
    min_version: MinVersion = None,
    command_id: AfterCommand = None,
    wait_s: WaitS = 5.0,
) -> dict[str, Any]:
    await read_your_writes(
        engine, principal, device_id, min_version=min_version, command_id=command_id, wait_s=wait_s, ends=ends
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
    responses=error_responses(401, 404, 413),
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
    "/alerts",
    summary="Alerts (anomalies the device actors scored), oldest first, filtered and paged",
    description="A home token sees its own home only.",
    responses=error_responses(401, 413),
)
async def list_alerts(
    principal: CurrentPrincipal,
    engine: Engine,
    home_id: HomeIdFilter = None,
    device_id: DeviceIdFilter = None,
    since: Annotated[
        datetime | None, Query(description="Only alerts that occurred at or after this time")
    ] = None,
    limit: Limit = 100,
    after: Cursor = None,
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
        query = query.where(
            tuple_(alerts.c.occurred_at, alerts.c.event_id) > (cursor_time(at), cursor_uuid(event_id))
        )
    query = query.order_by(alerts.c.occurred_at, alerts.c.event_id).limit(limit)
    async with engine.connect() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(query)]
    return page(rows, limit, lambda r: encode_cursor(r["occurred_at"].isoformat(), r["event_id"]))


@router.get(
    "/devices/{device_id}/rollups",
    summary="A device's telemetry rollups (windowed aggregates), oldest window first, paged",
    description="Each item: the window's record key, its length (`window`), start, and the record's value "
    "as the analytics job wrote it (the newest one for that window).",
    responses=error_responses(401, 404, 413),
)
async def device_rollups(
    device_id: DeviceId,
    principal: CurrentPrincipal,
    engine: Engine,
    cache: Cache,
    window: WindowFilter = None,
    since: Annotated[datetime | None, Query(description="Only windows starting at or after this")] = None,
    until: Annotated[datetime | None, Query(description="Only windows starting before this")] = None,
    limit: Limit = 100,
    after: Cursor = None,
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
        query = query.where(tuple_(rollups.c.window_start, rollups.c.key) > (cursor_time(start), key))
    query = query.order_by(rollups.c.window_start, rollups.c.key).limit(limit)
    async with engine.connect() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(query)]
    return page(rows, limit, lambda r: encode_cursor(r["window_start"].isoformat(), r["key"]))


class Health(BaseModel):
    status: str
    followers: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per folded topic feed (by name): what its last start read (RestartReport.as_json)",
    )


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
    journal_ends = JournalEnds(stack.kafka_bootstrap_servers, stack.topics.journal, settings.consumer_name)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.engine = engine or async_engine(stack.postgres_dsn, settings.schema_name, pool_size=10)
        app.state.redis = redis or Redis.from_url(stack.redis_url)
        await revocation_feed.start()  # tokens revoked anywhere are refused here within a second
        await journal_ends.start()  # where a device's journal ends: read-your-writes with command_id
        app.state.journal_ends = journal_ends
        try:
            yield
        finally:
            await journal_ends.stop()
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
    install_edge(app, max_body_bytes=settings.max_body_bytes)
    app.state.settings = settings
    app.state.token_secret = stack.token_secret
    app.state.revocations = revocations
    app.include_router(router)
    app.include_router(type_schemas.router)  # GET /v1/device-types: what the live page draws from
    app.include_router(session.router)  # POST /v1/session: the live page's short-lived token
    app.include_router(subscriptions.router)  # WS /v1/subscribe and its hub (in its lifespan), the page at /
    app.include_router(schedule_views.router)  # GET /v1/devices/{id}/schedule, from the home journal
    app.include_router(automation_views.router)  # automations, runs, deliveries (the same home view)
    app.include_router(suggestion_views.router)  # suggested programs (the same home view)
    app.include_router(backtest_views.router)  # POST /v1/automations/{id}/backtest: reads the journal
    app.include_router(campaign_views.router)  # GET /v1/campaigns: the campaigns topic folded (admin)
    app.include_router(runtime_views.router)  # GET .../runtime: the runtime batch's days (rollups table)

    @app.get(
        "/healthz",
        summary="200 once the API can serve (database and cache answer, the folded feeds caught up)",
        responses={
            503: {
                "model": Health,
                "description": "The database or the cache does not answer, or a feed is still catching up",
            }
        },
    )
    async def healthz(request: Request, response: Response) -> Health:
        try:
            async with request.app.state.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            await request.app.state.redis.ping()
        except Exception as exc:
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
            return Health(status=f"unavailable: {type(exc).__name__}")
        if not revocation_feed.caught_up.is_set():
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
            return Health(status="catching up with the token revocations")
        homes = request.app.state.homes_feed  # schedule_views' lifespan: the home journal folded
        followers = {homes.name: homes.restart.as_json()}
        if not homes.caught_up.is_set():
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
            return Health(status="catching up with the home journal", followers=followers)
        return Health(status="ok", followers=followers)

    return app
