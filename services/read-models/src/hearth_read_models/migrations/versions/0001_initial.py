"""The first read-model tables: twins, device events, commands, alerts, consumed offsets.

Revision ID: 0001
Revises:
"""

from alembic import op

from hearth_read_models.tables import metadata

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade(schema: str) -> None:
    bind = op.get_bind()
    metadata.create_all(bind.execution_options(schema_translate_map={None: schema}))


def downgrade(schema: str) -> None:
    bind = op.get_bind()
    metadata.drop_all(bind.execution_options(schema_translate_map={None: schema}))
