"""Checking a replay: per view table, the row count and an order-free checksum of what the replay wrote
(``Tally``, kept as it goes) against the same figures computed by PostgreSQL over the table.

The checksum of a table is the sum over its rows of an integer made from each row's content, computed
the same way in SQL (``CHECKSUMS``) and in Python (``Tally.expected``): the history and alerts from the
low 60 bits of their event ids (plus the version), twins, commands, rollups, runs and notification
outcomes from md5 digests. Runs and outcomes a rebuild carried over from the live schema (home_carry.py)
are counted as written by the replay.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

import psycopg
from psycopg import sql

from hearth_read_models.projection.view_store import Batch

LOW60 = "('x' || right(replace({}::text, '-', ''), 15))::bit(60)::bigint"  # a UUID's last 60 bits
DIGEST = "('x' || left(md5({}), 16))::bit(64)::bigint"  # md5's first 64 bits, signed
CHECKSUMS = {
    "twins": DIGEST.format("device_id || ':' || version || ':' || md5(state)"),
    "device_events": LOW60.format("event_id") + " + version",
    "commands": DIGEST.format("command_id || ':' || status"),
    "alerts": LOW60.format("event_id"),
    "rollups": DIGEST.format("key"),
    "automation_runs": DIGEST.format("run_id::text"),
    "notification_outcomes": DIGEST.format("notification_id || ':' || outcome"),
}
MASK60 = (1 << 60) - 1


def digest(text: str) -> int:
    """``DIGEST`` in Python."""
    return int.from_bytes(hashlib.md5(text.encode()).digest()[:8], "big", signed=True)


class TwinTally(NamedTuple):
    version: int
    state: bytes


class Sum(NamedTuple):
    """A table's expected row count and checksum."""

    rows: int
    checksum: int

    def plus(self, other: Sum) -> Sum:
        return Sum(self.rows + other.rows, self.checksum + other.checksum)


@dataclass
class Tally:
    """What a replay wrote: the expected row count and checksum of every table. Cheap per row (the
    history and alerts are summed as they go; twins, commands and rollups are digested at the end)."""

    twins: dict[str, TwinTally] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)  # command_id -> status
    rollups: set[str] = field(default_factory=set)
    runs: set[uuid.UUID] = field(default_factory=set)
    outcomes: dict[uuid.UUID, str] = field(default_factory=dict)  # notification_id -> outcome
    events: Sum = field(default_factory=lambda: Sum(0, 0))
    alerts: Sum = field(default_factory=lambda: Sum(0, 0))

    def add(self, batch: Batch) -> None:
        p = batch.projection
        for row in batch.twin_rows:
            self.twins[row.device_id] = TwinTally(row.version, row.state)
        history = sum((row.event_id.int & MASK60) + row.version for row in p.history)
        self.events = self.events.plus(Sum(len(p.history), history))
        self.alerts = self.alerts.plus(Sum(len(p.alerts), sum(a.event_id.int & MASK60 for a in p.alerts)))
        for command_id in p.changed_commands:
            self.commands[str(command_id)] = p.commands[command_id]["status"]
        for key, rollup in batch.rollups.items():
            if rollup is None:
                self.rollups.discard(key)
            else:
                self.rollups.add(key)
        self.runs.update(batch.home.runs)
        self.outcomes.update((key, row.outcome) for key, row in batch.home.outcomes.items())

    def carried(self, runs: list[uuid.UUID], outcomes: list[tuple[uuid.UUID, str]]) -> None:
        """Count rows copied from the live schema (home_carry.py) as written."""
        self.runs.update(runs)
        self.outcomes.update(outcomes)

    def merge(self, other: Tally) -> None:
        """Add what another process's share of the replay wrote (its devices and commands are its own)."""
        self.twins |= other.twins
        self.commands |= other.commands
        self.rollups |= other.rollups
        self.runs |= other.runs
        self.outcomes |= other.outcomes
        self.events = self.events.plus(other.events)
        self.alerts = self.alerts.plus(other.alerts)

    def expected(self) -> dict[str, Sum]:
        twins = (digest(f"{d}:{t.version}:{hashlib.md5(t.state).hexdigest()}") for d, t in self.twins.items())
        return {
            "twins": Sum(len(self.twins), sum(twins)),
            "device_events": self.events,
            "commands": Sum(len(self.commands), sum(digest(f"{c}:{s}") for c, s in self.commands.items())),
            "alerts": self.alerts,
            "rollups": Sum(len(self.rollups), sum(map(digest, self.rollups))),
            "automation_runs": Sum(len(self.runs), sum(digest(str(r)) for r in self.runs)),
            "notification_outcomes": Sum(
                len(self.outcomes), sum(digest(f"{n}:{o}") for n, o in self.outcomes.items())
            ),
        }


@dataclass
class TableCheck:
    table: str
    rows: int
    expected_rows: int
    checksum: int
    expected_checksum: int

    @property
    def ok(self) -> bool:
        return (self.rows, self.checksum) == (self.expected_rows, self.expected_checksum)


async def check_tables(conn: psycopg.AsyncConnection, tally: Tally) -> list[TableCheck]:
    """Row count and checksum of every view table (of ``conn``'s schema) against ``tally``."""
    expected = tally.expected()
    checks = []
    for table, expression in CHECKSUMS.items():
        cur = await conn.execute(
            sql.SQL("SELECT count(*), coalesce(sum({}), 0) FROM {}").format(
                sql.SQL(expression),
                sql.Identifier(table),
            )
        )
        rows, checksum = (await cur.fetchone()) or (0, 0)
        want = expected[table]
        checks.append(TableCheck(table, int(rows), want.rows, int(checksum), want.checksum))
    return checks
