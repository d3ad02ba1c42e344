"""The query API's composition root and endpoints: reads only views, never the write path."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response, status
from redis.asyncio import Redis
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from hearth_read_models import subscriptions
from hearth_read_models import tables as t
from hearth_read_models.db import async_engine
from hearth_read_models.projector import twin_key
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.auth import Principal
from hearth_shared.http import CurrentPrincipal, not_found


def _engine(request: Request) -> AsyncEngine:
    engine: AsyncEngine = request.app.state.engine
    return engine


def _redis(request: Request) -> Redis:
    redis: Redis = request.app.state.redis
    return redis


Engine = Annotated[AsyncEngine, Depends(_engine)]
Cache = Annotated[Redis, Depends(_redis)]

router = APIRouter(prefix="/v1")


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


@router.get("/devices", summary="The devices of a home")
async def list_devices(
    principal: CurrentPrincipal,
    engine: Engine,
    home_id: Annotated[str | None, Query(description="Required with an admin token")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    after: Annotated[str | None, Query(description="Paging: the last device_id of the previous page")] = None,
) -> dict[str, Any]:
    home_id = home_id or principal.home_id
    if home_id is None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "home_id is required with an admin token")
    if not principal.may_see(home_id):
        return {"items": [], "next_after": None}
    query = select(t.twins.c.view, t.twins.c.device_id).where(t.twins.c.home_id == home_id)
    if after:
        query = query.where(t.twins.c.device_id > after)
    async with engine.connect() as conn:
        rows = (await conn.execute(query.order_by(t.twins.c.device_id).limit(limit))).all()
    return {"items": [r.view for r in rows], "next_after": rows[-1].device_id if len(rows) == limit else None}


@router.get("/devices/{device_id}", summary="A device's twin")
async def get_twin(
    device_id: str, principal: CurrentPrincipal, engine: Engine, cache: Cache
) -> dict[str, Any]:
    return await visible_twin(engine, cache, principal, device_id)


@router.get("/devices/{device_id}/events", summary="A device's history, paged by version")
async def device_events(
    device_id: str,
    principal: CurrentPrincipal,
    engine: Engine,
    cache: Cache,
    after_version: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    await visible_twin(engine, cache, principal, device_id)
    query = (
        select(t.device_events.c.event, t.device_events.c.version)
        .where(t.device_events.c.device_id == device_id, t.device_events.c.version > after_version)
        .order_by(t.device_events.c.version)
        .limit(limit)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return {
        "items": [r.event for r in rows],
        "next_after_version": rows[-1].version if len(rows) == limit else None,
    }


@router.get("/commands/{command_id}", summary="A command's status and its history")
async def get_command(command_id: uuid.UUID, principal: CurrentPrincipal, engine: Engine) -> dict[str, Any]:
    async with engine.connect() as conn:
        row = (await conn.execute(select(t.commands).where(t.commands.c.command_id == command_id))).first()
    if row is None or not principal.may_see(row.home_id):
        raise not_found(f"command {command_id}")
    data = dict(row._mapping)
    for key in ("requested_at", "expires_at", "updated_at"):
        data[key] = data[key].isoformat()
    return data


def make_app(
    settings: ReadModelSettings | None = None,
    *,
    engine: AsyncEngine | None = None,
    redis: Redis | None = None,
) -> FastAPI:
    settings = settings or ReadModelSettings()
    stack = settings.stack

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.engine = engine or async_engine(stack.postgres_dsn, settings.schema_name, pool_size=10)
        app.state.redis = redis or Redis.from_url(stack.redis_url)
        try:
            yield
        finally:
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
    app.include_router(router)
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
        return {"status": "ok"}

    return app
