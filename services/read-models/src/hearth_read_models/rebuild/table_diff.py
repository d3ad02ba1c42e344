"""``verify``'s comparison: a live view table against a scratch schema's, row by row, in SQL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from sqlalchemy import JSON, Column, Table


@dataclass
class Difference:
    table: str
    key: str
    kind: str  # "missing" (the replay has it, live not), "unexpected" (live only), "differs"
    columns: list[str]


async def compare_table(
    conn: psycopg.AsyncConnection, table: Table, live: str, scratch: str, limit: int = 200
) -> tuple[list[Difference], int]:
    """The first ``limit`` differences of ``table`` between the two schemas, and how many there are."""
    keys = [c.name for c in table.primary_key.columns]
    others = [c for c in table.columns if c.name not in keys]
    col = sql.Identifier

    def value(alias: str, column: Column[Any]) -> sql.Composable:
        """A column of one side; json has no equality, so JSON columns are compared as jsonb."""
        cast = sql.SQL("::jsonb" if isinstance(column.type, JSON) else "")
        return sql.SQL("{}.{}{}").format(sql.Identifier(alias), col(column.name), cast)

    key_text = sql.SQL("concat_ws('/', {})").format(
        sql.SQL(", ").join(sql.SQL("coalesce(l.{0}, s.{0})::text").format(col(k)) for k in keys)
    )
    which = sql.SQL(", ").join(
        sql.SQL("CASE WHEN {} IS DISTINCT FROM {} THEN {} END").format(
            value("l", c), value("s", c), sql.Literal(c.name)
        )
        for c in others
    )
    query = sql.SQL(
        "SELECT {key}, CASE WHEN l.{k0} IS NULL THEN 'missing' WHEN s.{k0} IS NULL THEN 'unexpected'"
        " ELSE 'differs' END, array_remove(ARRAY[{which}]::text[], NULL), count(*) OVER ()"
        " FROM {live}.{t} l FULL JOIN {scratch}.{t} s ON {on}"
        " WHERE l.{k0} IS NULL OR s.{k0} IS NULL OR ({lc}) IS DISTINCT FROM ({sc})"
        " ORDER BY 1 LIMIT {limit}"
    ).format(
        key=key_text,
        k0=col(keys[0]),
        which=which,
        live=col(live),
        scratch=col(scratch),
        t=col(table.name),
        on=sql.SQL(" AND ").join(sql.SQL("l.{0} = s.{0}").format(col(k)) for k in keys),
        lc=sql.SQL(", ").join(value("l", c) for c in others),
        sc=sql.SQL(", ").join(value("s", c) for c in others),
        limit=sql.Literal(limit),
    )
    rows = await (await conn.execute(query)).fetchall()
    differences = [Difference(table.name, key, kind, list(columns)) for key, kind, columns, _ in rows]
    return differences, int(rows[0][3]) if rows else 0
