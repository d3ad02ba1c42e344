"""A projector's PostgreSQL side: one connection to one view schema, what it reads back (positions, the
twins and commands its caches lack) and how a batch is written.

A batch is written in the caller's transaction with its offsets: twins, commands, rollups, runs and
notification outcomes are COPYed into temporary staging tables and moved with one ``INSERT ... ON
CONFLICT`` per table (a run already there is kept: runs never change); history (in
PostgreSQL's binary COPY format) and alerts are COPYed straight in. The version guard makes the appends
safe: a twin at or above a row's version is never written over by an older one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec
import psycopg
from psycopg import sql
from psycopg.types.string import BytesBinaryDumper

from hearth_read_models.projection.home_rules import OUTCOME_COLUMNS, RUN_COLUMNS, HomeRows
from hearth_read_models.projection.journal_source import Offsets
from hearth_read_models.projection.rules import (
    ALERT_COLUMNS,
    HISTORY_COLUMNS,
    HISTORY_TYPES,
    ROLLUP_COLUMNS,
    TWIN_COLUMNS,
    Projection,
    RollupRow,
    TwinRow,
)
from hearth_read_models.projection.view_meta import read_generation, read_offsets
from hearth_read_models.store import tables as t
from hearth_read_models.store.db import connect
from hearth_shared.domain import Twin, decode_twin

COMMAND_COLUMNS = tuple(c.name for c in t.commands.columns)
_JSON_COMMAND_COLUMNS = frozenset({"params", "history"})
_json = msgspec.json.Encoder()


@dataclass
class Batch:
    """What one transaction writes (and a rebuild's tally counts)."""

    projection: Projection
    rollups: dict[str, RollupRow | None]  # by key; None: deleted (a tombstone)
    offsets: Offsets  # the next offset of each partition in the batch
    twin_rows: list[TwinRow] = field(default_factory=list)  # the twins written with it
    home: HomeRows = field(default_factory=HomeRows)  # runs and outcomes from the home journal


class Positions(NamedTuple):
    """What a projector (re)starts from."""

    generation: int
    offsets: Offsets
    empty: bool  # the schema has no twin yet


class ViewStore:
    """``consumer``: the name the offsets are stored under."""

    def __init__(self, dsn: str, schema: str, consumer: str) -> None:
        self.dsn = dsn
        self.schema = schema
        self.consumer = consumer
        self._conn: psycopg.AsyncConnection | None = None

    @property
    def conn(self) -> psycopg.AsyncConnection:
        if self._conn is None:
            raise RuntimeError("ViewStore.open() has not been awaited")
        return self._conn

    @property
    def connected(self) -> bool:
        return self._conn is not None

    async def open(self) -> Positions:
        """(Re)connect, make the staging tables, and read where the schema stands."""
        await self.close()
        self._conn = await connect(self.dsn, self.schema)
        # COPY's bytea columns (the history's facts) through psycopg's C dumper: the one registered for
        # bytea by default (dbapi20's, which also takes ``Binary``) is Python, called once per fact.
        self._conn.adapters.register_dumper(None, BytesBinaryDumper)
        for table in ("twins", "commands", "rollups", "automation_runs", "notification_outcomes"):
            await self.conn.execute(
                sql.SQL("CREATE TEMP TABLE {} (LIKE {}) ON COMMIT DELETE ROWS").format(
                    sql.Identifier(f"stage_{table}"), sql.Identifier(table)
                )
            )
        async with self.conn.transaction():
            generation = await read_generation(self.conn)
            offsets = await read_offsets(self.conn, self.consumer)
            cur = await self.conn.execute("SELECT NOT EXISTS (SELECT FROM twins)")
            empty = bool((await cur.fetchone() or (False,))[0])
        return Positions(generation, offsets, empty)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def twins(self, device_ids: list[str]) -> dict[str, Twin]:
        cur = await self.conn.execute(
            "SELECT device_id, state FROM twins WHERE device_id = ANY(%s)", (device_ids,)
        )
        return {device_id: decode_twin(state) for device_id, state in await cur.fetchall()}

    async def commands(self, command_ids: list[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
        cur = await self.conn.execute(
            sql.SQL("SELECT {} FROM commands WHERE command_id = ANY(%s)").format(_columns(COMMAND_COLUMNS)),
            (command_ids,),
        )
        rows = (dict(zip(COMMAND_COLUMNS, row, strict=True)) for row in await cur.fetchall())
        return {row["command_id"]: row for row in rows}

    async def write(self, batch: Batch) -> None:
        """The batch's rows and offsets (in the caller's transaction)."""
        p = batch.projection
        await self._merge(
            "twins", TWIN_COLUMNS, batch.twin_rows, "device_id", "WHERE twins.version < EXCLUDED.version"
        )
        await self._copy("device_events", HISTORY_COLUMNS, p.history, HISTORY_TYPES)
        await self._copy("alerts", ALERT_COLUMNS, p.alerts)
        rows = [_command_row(p.commands[c]) for c in p.changed_commands]
        await self._merge("commands", COMMAND_COLUMNS, rows, "command_id")
        deleted = [key for key, row in batch.rollups.items() if row is None]
        if deleted:
            await self.conn.execute("DELETE FROM rollups WHERE key = ANY(%s)", (deleted,))
        await self._merge("rollups", ROLLUP_COLUMNS, [r for r in batch.rollups.values() if r], "key")
        runs = list(batch.home.runs.values())
        await self._merge("automation_runs", RUN_COLUMNS, runs, "run_id", replace=False)
        outcomes = list(batch.home.outcomes.values())
        await self._merge("notification_outcomes", OUTCOME_COLUMNS, outcomes, "notification_id")
        await self._write_offsets(batch.offsets)

    async def _copy(
        self,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        binary_types: Sequence[str] | None = None,
    ) -> None:
        """COPY ``rows`` in; in the binary format when their ``binary_types`` are given (no text to
        format here nor to parse there)."""
        if not rows:
            return
        statement = sql.SQL("COPY {} ({}) FROM STDIN{}").format(
            sql.Identifier(table),
            _columns(columns),
            sql.SQL(" (FORMAT BINARY)" if binary_types else ""),
        )
        async with self.conn.cursor() as cur, cur.copy(statement) as copy:
            if binary_types:
                copy.set_types(list(binary_types))
            for row in rows:
                await copy.write_row(row)

    async def _merge(
        self,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        key: str,
        where: str = "",
        *,
        replace: bool = True,
    ) -> None:
        """Insert or replace ``rows`` by ``key`` (``replace=False``: a row already there stays): COPY into
        the staging table, then one INSERT."""
        if not rows:
            return
        await self._copy(f"stage_{table}", columns, rows)
        update = sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in columns if c != key
        )
        conflict = "DO UPDATE SET {u} {w}" if replace else "DO NOTHING"
        await self.conn.execute(
            sql.SQL("INSERT INTO {t} ({c}) SELECT {c} FROM {s} ON CONFLICT ({k}) " + conflict).format(
                t=sql.Identifier(table),
                c=_columns(columns),
                s=sql.Identifier(f"stage_{table}"),
                k=sql.Identifier(key),
                u=update,
                w=sql.SQL(where),
            )
        )

    async def _write_offsets(self, offsets: Offsets) -> None:
        async with self.conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO consumed_offsets (consumer, topic, partition, next_offset)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (consumer, topic, partition)"
                " DO UPDATE SET next_offset = EXCLUDED.next_offset",
                [(self.consumer, tp.topic, tp.partition, o) for tp, o in offsets.items()],
            )


def _command_row(command: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        _json.encode(command[c]).decode() if c in _JSON_COMMAND_COLUMNS else command[c]
        for c in COMMAND_COLUMNS
    )


def _columns(columns: Iterable[str]) -> sql.Composed:
    return sql.SQL(", ").join(map(sql.Identifier, columns))
