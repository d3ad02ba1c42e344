"""History keeps each fact as ``json`` (the text as it came, checked to be JSON) instead of ``jsonb``.

Nothing queries inside a stored fact (its envelope has columns of its own), and parsing every fact into
jsonb was most of PostgreSQL's work in a replay. Schemas made before 0001 was frozen may have ``json``
already, so this converts only a column that is still ``jsonb``.

Revision ID: 0003
Revises: 0002
"""

from alembic import op
from sqlalchemy import text

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _event_type(schema: str) -> str | None:
    return (
        op.get_bind()
        .execute(
            text(
                "SELECT data_type FROM information_schema.columns"
                " WHERE table_schema = :schema AND table_name = 'device_events' AND column_name = 'event'"
            ),
            {"schema": schema},
        )
        .scalar()
    )


def upgrade(schema: str) -> None:
    if _event_type(schema) == "jsonb":
        op.execute(text(f'ALTER TABLE "{schema}".device_events ALTER COLUMN event TYPE json'))


def downgrade(schema: str) -> None:
    if _event_type(schema) == "json":
        op.execute(text(f'ALTER TABLE "{schema}".device_events ALTER COLUMN event TYPE jsonb'))
