"""Engines and migrations. Nothing connects at import time."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

MIGRATIONS = Path(__file__).parent / "migrations"


def async_engine(dsn: str, schema: str, *, pool_size: int = 5) -> AsyncEngine:
    """An engine whose unqualified tables live in ``schema``."""
    engine = create_async_engine(dsn, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)
    return engine.execution_options(schema_translate_map={None: schema})  # type: ignore[return-value]


def sync_engine(dsn: str) -> Engine:
    return create_engine(dsn, pool_pre_ping=True)


def migrate(dsn: str, schema: str) -> None:
    """Bring ``schema`` to the newest read-model tables (creating it when missing)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", dsn)
    config.attributes["schema"] = schema
    command.upgrade(config, "head")
