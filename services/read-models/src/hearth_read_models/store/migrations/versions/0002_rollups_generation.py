"""Rollups, the generation counter (meta) and the alert indexes for filtered, paged queries.

Revision ID: 0002
Revises: 0001

Frozen like 0001. Until 0001 was frozen it created the tables of the then current definitions, so a
schema made by it has these objects already: every step here creates only what is missing.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _exists(schema: str, name: str) -> bool:
    found = op.get_bind().execute(text("SELECT to_regclass(:name)"), {"name": f'"{schema}"."{name}"'})
    return found.scalar() is not None


def upgrade(schema: str) -> None:
    if not _exists(schema, "rollups"):
        op.create_table(
            "rollups",
            sa.Column("key", sa.Text, primary_key=True),
            sa.Column("scope", sa.String, nullable=False),
            sa.Column("subject_id", sa.String, nullable=False),
            sa.Column("window", sa.String, nullable=False),
            sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
            sa.Column("value", JSONB, nullable=False),
            schema=schema,
        )
        op.create_index(
            "rollups_subject_time", "rollups", ["scope", "subject_id", "window_start"], schema=schema
        )
    if not _exists(schema, "meta"):
        op.create_table(
            "meta",
            sa.Column("id", sa.Integer, sa.CheckConstraint("id = 1"), primary_key=True),
            sa.Column("generation", sa.BigInteger, nullable=False),
            schema=schema,
        )
    for name, columns in (
        ("alerts_home_time", ["home_id", "occurred_at", "event_id"]),
        ("alerts_device_time", ["device_id", "occurred_at", "event_id"]),
    ):
        if not _exists(schema, name):
            op.create_index(name, "alerts", columns, schema=schema)
    op.execute(text(f'INSERT INTO "{schema}".meta (id, generation) VALUES (1, 0) ON CONFLICT DO NOTHING'))


def downgrade(schema: str) -> None:
    op.drop_index("alerts_device_time", "alerts", schema=schema)
    op.drop_index("alerts_home_time", "alerts", schema=schema)
    op.drop_table("meta", schema=schema)
    op.drop_table("rollups", schema=schema)
