"""Automation runs and notification outcomes, projected from the home journal (issue 20: history the
query API held in memory), with the indexes their reads need: an automation's runs and a home's outcomes,
newest first (by the home journal offset they came from).

Revision ID: 0004
Revises: 0003

The tables start empty: the live projector's positions on the home journal start at its first offset (no
``consumed_offsets`` rows for that topic yet), so its first batches fill them with every run and outcome
the topic holds. Like 0002, it creates only what is missing (a schema made by 0001 before it was frozen
has every table of the then current definitions).
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import JSON

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _exists(schema: str, name: str) -> bool:
    found = op.get_bind().execute(text("SELECT to_regclass(:name)"), {"name": f'"{schema}"."{name}"'})
    return found.scalar() is not None


def upgrade(schema: str) -> None:
    if not _exists(schema, "automation_runs"):
        _create_runs(schema)
    if not _exists(schema, "notification_outcomes"):
        _create_outcomes(schema)


def _create_runs(schema: str) -> None:
    op.create_table(
        "automation_runs",
        sa.Column("run_id", sa.Uuid, primary_key=True),
        sa.Column("automation_id", sa.Uuid, nullable=False),
        sa.Column("home_id", sa.String, nullable=False),
        sa.Column("ran_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("journal_partition", sa.Integer, nullable=False),
        sa.Column("journal_offset", sa.BigInteger, nullable=False),
        sa.Column("run", JSON, nullable=False),
        schema=schema,
    )
    op.create_index(
        "automation_runs_newest",
        "automation_runs",
        ["automation_id", "journal_offset", "run_id"],
        schema=schema,
    )


def _create_outcomes(schema: str) -> None:
    op.create_table(
        "notification_outcomes",
        sa.Column("notification_id", sa.Uuid, primary_key=True),
        sa.Column("home_id", sa.String, nullable=False),
        sa.Column("outcome", sa.String, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("journal_partition", sa.Integer, nullable=False),
        sa.Column("journal_offset", sa.BigInteger, nullable=False),
        sa.Column("payload", JSON, nullable=False),
        schema=schema,
    )
    op.create_index(
        "notification_outcomes_newest",
        "notification_outcomes",
        ["home_id", "journal_offset", "notification_id"],
        schema=schema,
    )


def downgrade(schema: str) -> None:
    op.drop_table("notification_outcomes", schema=schema)
    op.drop_table("automation_runs", schema=schema)
