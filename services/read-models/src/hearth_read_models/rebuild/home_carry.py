"""What a rebuild (or verify) takes over from the live views instead of replaying: the automation runs and
notification outcomes whose home-journal records are gone from the topic.

Why replay the home journal at all, and carry over only that: a rebuild replays the home journal beside
the journal (its main process, like the rollups topic), so runs and outcomes are projected again by
today's rules and ``hearth verify`` compares them row by row. But the home journal is not archived: its
head, once deleted (a retention window set on it by hand, or Kafka's DeleteRecords as the chaos test does),
cannot be replayed, and a rebuild would lose every run and outcome it held. Each row keeps the position
it came from (``journal_partition``, ``journal_offset``), so the rows below a partition's first offset
(the topic's low watermark) are exactly those the topic no longer holds: they are copied from the live
schema into the new one before the replay, and the replay projects the rest. With the whole topic still
there (its retention is forever by default), nothing is copied. Verify then finds the copied rows equal
by construction; what it checks is everything the topic still holds.

A run is never replaced (``home_rules``), so a copied run stays as the live one; an outcome's later fact,
if still in the topic, replaces the copied row in the replay as it did live.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

import psycopg
from psycopg import sql

from hearth_read_models.projection.home_rules import OUTCOME_COLUMNS, RUN_COLUMNS


class Carried(NamedTuple):
    runs: list[uuid.UUID]
    outcomes: list[tuple[uuid.UUID, str]]  # (notification_id, outcome)


async def carry_over(conn: psycopg.AsyncConnection, live: str, new: str, lows: dict[int, int]) -> Carried:
    """Copy from ``live`` into ``new`` the runs and outcomes of home-journal records below ``lows`` (the
    topic's first offset per partition: the records it no longer holds)."""
    gone = {partition: low for partition, low in lows.items() if low > 0}
    if not gone:
        return Carried([], [])
    runs = await _copy(conn, "automation_runs", RUN_COLUMNS, ("run_id",), live, new, gone)
    outcomes = await _copy(
        conn, "notification_outcomes", OUTCOME_COLUMNS, ("notification_id", "outcome"), live, new, gone
    )
    return Carried(
        [uuid.UUID(str(r[0])) for r in runs], [(uuid.UUID(str(r[0])), str(r[1])) for r in outcomes]
    )


async def _copy(
    conn: psycopg.AsyncConnection,
    table: str,
    columns: tuple[str, ...],
    returning: tuple[str, ...],
    live: str,
    new: str,
    gone: dict[int, int],
) -> list[tuple[object, ...]]:
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    statement = sql.SQL(
        "INSERT INTO {new} ({c}) SELECT {c} FROM {live}"
        " JOIN unnest(%s::int[], %s::bigint[]) AS gone(p, low_offset)"
        " ON journal_partition = gone.p WHERE journal_offset < gone.low_offset"
        " ON CONFLICT DO NOTHING RETURNING {r}"
    ).format(
        new=sql.Identifier(new, table),
        live=sql.Identifier(live, table),
        c=names,
        r=sql.SQL(", ").join(map(sql.Identifier, returning)),
    )
    cur = await conn.execute(statement, (list(gone), list(gone.values())))
    return list(await cur.fetchall())
