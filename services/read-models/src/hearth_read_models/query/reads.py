"""Reading the views for one caller: a twin (Redis cache first), what the caller may see, and the
read-your-writes wait (``min_version`` / ``command_id``; with ``command_id``, up to where the device's
journal ended when the read arrived: ``journal_ends`` says why).

A device the caller may not see is answered exactly like one that does not exist (404, after the same wait).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiokafka.errors import KafkaError
from fastapi import HTTPException, status
from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from hearth_read_models.query.journal_ends import JournalEnds, JournalMark
from hearth_read_models.store import tables as t
from hearth_read_models.store.live_channels import twin_key
from hearth_shared.schema.auth import Principal
from hearth_shared.web.http import not_found

POLL_S = 0.05  # how often a read-your-writes wait looks again
MARK_TIMEOUT_S = 2.0  # the least a read with ``command_id`` gives the broker to say where the journal ends


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
    ends: JournalEnds,
) -> None:
    """Wait until the committed views of ``device_id`` hold what the caller was told (the rule:
    ``READ_YOUR_WRITES`` in app.py). ``min_version``: the twin is at that version or later.
    ``command_id``: the views know the command, and have consumed the device's journal partition as far
    as it went when this read arrived (``journal_ends``), so they hold the command in at least the status
    any answer before this read reported, and the twin as of that status."""
    if min_version is None and command_id is None:
        return
    mark = None if command_id is None else await journal_mark(ends, device_id, wait_s)
    seen: list[Any] = [None]

    async def arrived() -> bool:
        query = select(t.twins.c.home_id, t.twins.c.version).where(t.twins.c.device_id == device_id)
        async with engine.connect() as conn:
            twin = (await conn.execute(query)).first()
            if twin is None or not principal.may_see(twin.home_id):
                return False
            seen[0] = twin.version
            if min_version is not None and twin.version < min_version:
                return False
            if command_id is None or mark is None:
                return True
            known = select(t.commands.c.command_id).where(
                t.commands.c.command_id == command_id, t.commands.c.device_id == device_id
            )
            consumed = select(t.consumed_offsets.c.next_offset).where(
                t.consumed_offsets.c.consumer == mark.consumer,
                t.consumed_offsets.c.topic == mark.topic,
                t.consumed_offsets.c.partition == mark.partition,
            )
            if (await conn.execute(known)).first() is None:
                return False
            return passed(await conn.scalar(consumed), mark)

    if not await poll(arrived, wait_s):
        if seen[0] is None:
            raise not_found(f"device {device_id}")
        wanted = f"version {min_version}" if min_version else f"command {command_id} as the journal has it"
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"the view of device {device_id} is at version {seen[0]} and has not reached {wanted} yet",
            headers={"Retry-After": "1"},
        )


def passed(consumed: int | None, mark: JournalMark) -> bool:
    """Have the views consumed the journal up to ``mark``? (``consumed``: the projector's next offset
    for that partition, None before it consumed any of it; an empty partition's end is 0.)"""
    return (consumed or 0) >= mark.end_offset


async def journal_mark(ends: JournalEnds, device_id: str, wait_s: float) -> JournalMark:
    """How far the device's journal went now; 503 if the broker does not say within the wait (at least
    ``MARK_TIMEOUT_S``: the read cannot be answered as of its arrival without it)."""
    try:
        async with asyncio.timeout(max(wait_s, MARK_TIMEOUT_S)):
            return await ends.mark(device_id)
    except (TimeoutError, KafkaError) as error:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"cannot tell how far the journal of device {device_id} went ({type(error).__name__})",
            headers={"Retry-After": "1"},
        ) from error
