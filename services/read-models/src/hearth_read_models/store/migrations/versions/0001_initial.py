"""The first read-model tables: twins, device events, commands, alerts, consumed offsets.

Revision ID: 0001
Revises:

Frozen: these are the tables as 0001 first created them (history as ``jsonb``; no rollups, meta or
alert indexes yet: 0002 and 0003 add and change those). A migration never reads today's table
definitions, or an old database and a fresh one would go through different steps.
tests/integration/test_migrations.py upgrades an empty schema through every migration and compares the
result with ``hearth_read_models.store.tables``.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade(schema: str) -> None:
    op.create_table(
        "twins",
        sa.Column("device_id", sa.String, primary_key=True),
        sa.Column("home_id", sa.String, nullable=False),
        sa.Column("device_type", sa.String, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("online", sa.Boolean, nullable=False),
        sa.Column("view", JSONB, nullable=False),
        sa.Column("state", sa.LargeBinary, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        schema=schema,
    )
    op.create_index("ix_twins_home_id", "twins", ["home_id"], schema=schema)
    op.create_table(
        "device_events",
        sa.Column("device_id", sa.String, primary_key=True),
        sa.Column("version", sa.BigInteger, primary_key=True),
        sa.Column("event_id", sa.Uuid, nullable=False),
        sa.Column("type", sa.String, nullable=False),
        sa.Column("home_id", sa.String, nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("correlation_id", sa.Uuid),
        sa.Column("event", JSONB, nullable=False),
        schema=schema,
    )
    op.create_table(
        "commands",
        sa.Column("command_id", sa.Uuid, primary_key=True),
        sa.Column("device_id", sa.String, nullable=False),
        sa.Column("home_id", sa.String, nullable=False),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("params", JSONB, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("reason", sa.String),
        sa.Column("message", sa.Text),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("history", JSONB, nullable=False),
        schema=schema,
    )
    op.create_index("ix_commands_device_id", "commands", ["device_id"], schema=schema)
    op.create_index("ix_commands_home_id", "commands", ["home_id"], schema=schema)
    op.create_table(
        "alerts",
        sa.Column("event_id", sa.Uuid, primary_key=True),
        sa.Column("device_id", sa.String, nullable=False),
        sa.Column("home_id", sa.String, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("metric", sa.String, nullable=False),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("threshold", sa.Float, nullable=False),
        sa.Column("model_version", sa.Integer, nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        schema=schema,
    )
    op.create_index("ix_alerts_device_id", "alerts", ["device_id"], schema=schema)
    op.create_index("ix_alerts_home_id", "alerts", ["home_id"], schema=schema)
    op.create_table(
        "consumed_offsets",
        sa.Column("consumer", sa.String, primary_key=True),
        sa.Column("topic", sa.String, primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True),
        sa.Column("next_offset", sa.BigInteger, nullable=False),
        schema=schema,
    )


def downgrade(schema: str) -> None:
    for table in ("consumed_offsets", "alerts", "commands", "device_events", "twins"):
        op.drop_table(table, schema=schema)
