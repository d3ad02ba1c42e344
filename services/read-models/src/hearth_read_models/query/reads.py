"""Reading the views for one caller: a twin (Redis cache first), what the caller may see, and the
read-your-writes wait (``min_version`` / ``command_id``).

A device the caller may not see is answered exactly like one that does not exist (404, after the same wait).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from fastapi import HTTPException, status
from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from hearth_read_models.store import tables as t
from hearth_read_models.store.live_channels import twin_key
from hearth_shared.schema.auth import Principal
from hearth_shared.web.http import not_found

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
