"""The two things every writer of a view schema reads of it, written once: its generation (``meta``; a
swap increments it) and the consumed offsets a projector stored with its rows.

``schema=None`` reads the connection's own schema (its ``search_path``, see ``db.connect``); a name reads
that schema (the rebuild looks at the live one and its own from one connection).
"""

from __future__ import annotations

import psycopg
from aiokafka import TopicPartition
from psycopg import sql


def _table(schema: str | None, table: str) -> sql.Composable:
    return sql.Identifier(table) if schema is None else sql.Identifier(schema, table)


async def read_generation(conn: psycopg.AsyncConnection, schema: str | None = None) -> int:
    """The schema's generation (0 before any swap)."""
    cur = await conn.execute(sql.SQL("SELECT generation FROM {}").format(_table(schema, "meta")))
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def read_offsets(
    conn: psycopg.AsyncConnection, consumer: str, schema: str | None = None
) -> dict[TopicPartition, int]:
    """The next offset to project per partition, as ``consumer`` committed it with its rows."""
    cur = await conn.execute(
        sql.SQL("SELECT topic, partition, next_offset FROM {} WHERE consumer = %s").format(
            _table(schema, "consumed_offsets")
        ),
        (consumer,),
    )
    return {
        TopicPartition(topic, partition): int(offset) for topic, partition, offset in await cur.fetchall()
    }
