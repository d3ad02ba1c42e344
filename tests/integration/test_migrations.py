"""The migrations build exactly the tables the code defines (``hearth_read_models.store.tables``).

Two ways a schema reaches the newest migration: from nothing, through every frozen migration in turn; and
from a schema made before 0001 was frozen (when 0001 created the then current tables, modelled here by
creating today's tables and stamping 0001). Both must end equal to the models, or a migration is missing.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import text

from hearth_devstack.servers.postgres import PostgresServer
from hearth_read_models.store.db import MIGRATIONS, migrate, sync_engine
from hearth_read_models.store.tables import metadata

pytestmark = pytest.mark.integration


def differences(dsn: str, schema: str) -> list[Any]:
    """What alembic's autogenerate would change to make ``schema`` equal the models."""
    engine = sync_engine(dsn)
    try:
        with engine.connect() as conn:
            conn.execute(text(f'SET search_path TO "{schema}"'))
            conn.dialect.default_schema_name = schema
            context = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "include_name": lambda name, kind, _: not (kind == "table" and name == "alembic_version"),
                },
            )
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


def test_every_migration_from_nothing_gives_the_models(postgres: PostgresServer) -> None:
    schema = f"mig_{uuid.uuid4().hex[:8]}"
    migrate(postgres.dsn, schema)
    assert differences(postgres.dsn, schema) == []


def test_a_schema_made_before_0001_was_frozen_upgrades_to_the_models(postgres: PostgresServer) -> None:
    schema = f"mig_{uuid.uuid4().hex[:8]}"
    engine = sync_engine(postgres.dsn)
    try:
        with engine.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
            metadata.create_all(conn.execution_options(schema_translate_map={None: schema}))
    finally:
        engine.dispose()
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", postgres.dsn)
    config.attributes["schema"] = schema
    command.stamp(config, "0001")
    migrate(postgres.dsn, schema)
    assert differences(postgres.dsn, schema) == []
