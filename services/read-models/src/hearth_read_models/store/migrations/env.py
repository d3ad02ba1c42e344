"""Alembic environment: migrates the read-model tables inside one PostgreSQL schema.

The schema comes from the config attribute ``schema`` (``migrate(dsn, schema)`` sets it), so the same
migrations build the live views and a fresh rebuild schema alike; each schema keeps its own
``alembic_version`` table.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, text

config = context.config
schema: str = config.attributes["schema"]
url: str = config.get_main_option("sqlalchemy.url") or ""

engine = create_engine(url)
with engine.begin() as connection:
    connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    connection.execute(text(f'SET search_path TO "{schema}"'))
    connection.dialect.default_schema_name = schema
    context.configure(connection=connection, version_table_schema=schema, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations(schema=schema)
engine.dispose()
