"""Engines and migrations. Nothing connects at import time."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
from alembic import command
from alembic.config import Config
from psycopg import sql
from sqlalchemy import Engine, create_engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

MIGRATIONS = Path(__file__).parent / "migrations"
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_schema(schema: str) -> str:
    """A schema name Hearth may create, rename and drop: lower-case letters, digits and _."""
    if not _SCHEMA.fullmatch(schema):
        raise ValueError(f"not a usable schema name: {schema!r}")
    return schema


def libpq_dsn(dsn: str) -> str:
    """The SQLAlchemy URL as a plain libpq one (what psycopg connects with)."""
    return make_url(dsn).set(drivername="postgresql").render_as_string(hide_password=False)


async def connect(dsn: str, schema: str) -> psycopg.AsyncConnection:
    """A psycopg connection (autocommit: transactions are explicit) whose unqualified tables are in
    ``schema``. The name is looked up per statement, so a swap that renames schemas is seen at once."""
    conn = await psycopg.AsyncConnection.connect(libpq_dsn(dsn), autocommit=True)
    await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(check_schema(schema))))
    return conn


def swap_lock(schema: str) -> str:
    """The advisory lock (by ``hashtext`` of this name) the live projector holds for each batch and a
    swap holds while it catches up and renames: they never interleave."""
    return f"hearth.read-models.swap:{schema}"


def async_engine(dsn: str, schema: str, *, pool_size: int = 5) -> AsyncEngine:
    """An engine whose unqualified tables live in ``schema``."""
    engine = create_async_engine(dsn, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)
    return engine.execution_options(schema_translate_map={None: schema})


def sync_engine(dsn: str) -> Engine:
    return create_engine(dsn, pool_pre_ping=True)


def migrate(dsn: str, schema: str) -> None:
    """Bring ``schema`` to the newest read-model tables (creating it when missing)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", dsn)
    config.attributes["schema"] = schema
    command.upgrade(config, "head")
