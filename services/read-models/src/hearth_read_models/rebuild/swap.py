"""Swapping a rebuilt schema in for the live one, under the swap lock the live projector takes for every
batch (``db.swap_lock``), so no batch runs meanwhile.

In one durable transaction: the new schema takes the next generation number, the twins whose view or
state it changes are listed (for the cache refresh), the schemas are renamed (live -> old, new -> live)
and the old one is dropped. The live projector's next batch sees the other generation and reloads its
positions from the swapped-in schema, so it goes on where the new views end.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, NamedTuple

import psycopg
from psycopg import sql

from hearth_read_models.projection.view_meta import read_generation
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.store.db import check_schema, connect, swap_lock

log = logging.getLogger(__name__)


class ChangedTwin(NamedTuple):
    device_id: str
    home_id: str
    version: int | None
    view: dict[str, Any] | None  # None: the twin is gone


def stamp() -> str:
    """A time for a schema's name."""
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S")


async def drop_schema(dsn: str, schema: str) -> None:
    async with await connect(dsn, "public") as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(check_schema(schema)))
        )


@contextlib.asynccontextmanager
async def swap_locked(settings: ReadModelSettings) -> AsyncIterator[psycopg.AsyncConnection]:
    """A connection holding the swap lock of the live schema (a session lock: it outlives transactions)."""
    live = settings.schema_name
    async with await connect(settings.stack.postgres_dsn, live) as conn:
        await conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (swap_lock(live),))
        try:
            yield conn
        finally:
            with contextlib.suppress(psycopg.Error):
                await conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (swap_lock(live),))


async def swap_in(conn: psycopg.AsyncConnection, live: str, new: str) -> list[ChangedTwin]:
    """Swap ``new`` in as ``live`` (see the module); returns every twin whose view or state changed."""
    old = f"{live}_old_{stamp()}"
    ident = {"live": sql.Identifier(live), "new": sql.Identifier(new), "old": sql.Identifier(old)}
    async with conn.transaction():
        await conn.execute("SET LOCAL synchronous_commit = on")
        generation = await read_generation(conn, live)
        await conn.execute(
            sql.SQL("UPDATE {new}.meta SET generation = %s").format(**ident), (generation + 1,)
        )
        cur = await conn.execute(
            sql.SQL(
                "SELECT coalesce(n.device_id, o.device_id), coalesce(n.home_id, o.home_id), n.version, n.view"
                " FROM {new}.twins n FULL JOIN {live}.twins o ON n.device_id = o.device_id"
                " WHERE n.view IS DISTINCT FROM o.view OR n.state IS DISTINCT FROM o.state"
            ).format(**ident)
        )
        changed = [ChangedTwin(*row) for row in await cur.fetchall()]
        await conn.execute(sql.SQL("ALTER SCHEMA {live} RENAME TO {old}").format(**ident))
        await conn.execute(sql.SQL("ALTER SCHEMA {new} RENAME TO {live}").format(**ident))
        await conn.execute(sql.SQL("DROP SCHEMA {old} CASCADE").format(**ident))
    log.info("swapped %s in as %s (generation %d); %d twins changed", new, live, generation + 1, len(changed))
    return changed
