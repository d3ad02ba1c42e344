"""Rollups, the generation counter (meta) and the alert indexes for filtered, paged queries.

Revision ID: 0002
Revises: 0001

0001 creates the tables of the *current* metadata, so on a fresh schema these objects exist already:
every step here checks first.
"""

from alembic import op
from sqlalchemy import text

from hearth_read_models import tables as t

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade(schema: str) -> None:
    bind = op.get_bind().execution_options(schema_translate_map={None: schema})
    for table in (t.rollups, t.meta):
        table.create(bind, checkfirst=True)
    for index in t.alerts.indexes:
        index.create(bind, checkfirst=True)
    op.execute(text(f'INSERT INTO "{schema}".meta (id, generation) VALUES (1, 0) ON CONFLICT DO NOTHING'))


def downgrade(schema: str) -> None:
    bind = op.get_bind().execution_options(schema_translate_map={None: schema})
    for index in t.alerts.indexes:
        if index.name in ("alerts_home_time", "alerts_device_time"):
            index.drop(bind, checkfirst=True)
    t.meta.drop(bind, checkfirst=True)
    t.rollups.drop(bind, checkfirst=True)
