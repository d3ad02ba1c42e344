"""The history's hand-built binary COPY stream (history_copy.py) against psycopg's own: the same rows COPYed
both ways into real PostgreSQL read back equal, NULLs, non-ASCII text, time zones and old dates included.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from hearth.stack.postgres import PostgresServer
from hearth_read_models.db import libpq_dsn
from hearth_read_models.history_copy import history_stream
from hearth_read_models.projection import HISTORY_COLUMNS, HISTORY_TYPES, HistoryRow

pytestmark = pytest.mark.integration

PLUS_2 = timezone(timedelta(hours=2))
ROWS = [
    HistoryRow("dev-1", 1, uuid.uuid4(), "device.registered", "home-1",
               datetime(2026, 11, 24, 9, 0, 0, 123456, tzinfo=UTC), datetime(2026, 11, 24, 9, 1, tzinfo=UTC),
               None, b'{"type": "device.registered"}'),
    HistoryRow("d\u00e9v-\u00fc", 2**62, uuid.uuid4(), "state.reported", "h\u00f6me",
               datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-5))),
               datetime(1970, 1, 1, tzinfo=UTC), uuid.uuid4(), '{"name": "K\u00fcche \u2603"}'.encode()),
    HistoryRow("dev-3", 3, uuid.uuid4(), "command.converged", "home-1",
               datetime(2026, 3, 29, 1, 30), datetime(2026, 3, 29, 2, 30, tzinfo=PLUS_2),
               uuid.uuid4(), b"{}"),
]  # fmt: skip


def _table(name: str) -> sql.Composed:
    columns = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t))
        for c, t in zip(HISTORY_COLUMNS, HISTORY_TYPES, strict=True)
    )
    return sql.SQL("CREATE TEMP TABLE {} ({})").format(sql.Identifier(name), columns)


async def test_the_stream_reads_back_as_psycopg_rows(postgres: PostgresServer) -> None:
    copy_into = sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)")
    async with await psycopg.AsyncConnection.connect(libpq_dsn(postgres.dsn), autocommit=True) as conn:
        await conn.execute(_table("by_psycopg"))
        await conn.execute(_table("by_stream"))
        async with conn.cursor() as cur, cur.copy(copy_into.format(sql.Identifier("by_psycopg"))) as copy:
            copy.set_types(list(HISTORY_TYPES))
            for row in ROWS:
                # psycopg's own formatting of the row as the history's types (a naive time taken as UTC)
                await copy.write_row([v.replace(tzinfo=UTC) if _naive(v) else v for v in row])
        async with conn.cursor() as cur, cur.copy(copy_into.format(sql.Identifier("by_stream"))) as copy:
            await copy.write(history_stream(ROWS))
        async with conn.cursor(row_factory=dict_row) as cur:
            expected = await (await cur.execute("SELECT * FROM by_psycopg ORDER BY version")).fetchall()
            got = await (await cur.execute("SELECT * FROM by_stream ORDER BY version")).fetchall()
    assert len(expected) == len(ROWS)
    assert got == expected
    by_device = {row["device_id"]: row for row in got}
    first, second, third = (by_device[row.device_id] for row in ROWS)
    assert first["correlation_id"] is None and first["version"] == 1
    assert (second["version"], second["correlation_id"]) == (2**62, ROWS[1].correlation_id)
    assert bytes(second["event"]) == ROWS[1].event
    assert second["occurred_at"] == ROWS[1].occurred_at
    assert third["occurred_at"] == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)  # naive: taken as UTC


def test_an_empty_batch_is_a_whole_stream() -> None:
    stream = history_stream([])
    assert stream.startswith(b"PGCOPY\n\xff\r\n\x00") and stream.endswith(b"\xff\xff")
    assert len(stream) == 11 + 8 + 2


def _naive(value: object) -> bool:
    return isinstance(value, datetime) and value.tzinfo is None
