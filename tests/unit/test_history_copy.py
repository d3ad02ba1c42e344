"""history_copy.encode_history against psycopg's own binary COPY formatter, byte for byte."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from psycopg import adapt, postgres, pq
from psycopg._copy_base import BinaryFormatter

from hearth_read_models.projection.history_copy import encode_history
from hearth_read_models.projection.rules import HISTORY_TYPES, HistoryRow


def psycopg_copy(rows: list[HistoryRow]) -> bytes:
    transformer = adapt.Transformer()
    transformer.set_dumper_types([postgres.types[name].oid for name in HISTORY_TYPES], pq.Format.BINARY)
    formatter = BinaryFormatter(transformer)
    out = bytearray()
    for row in rows:
        out += formatter.write_row(row)
    out += formatter.end()
    return bytes(out)


def row(**changes: Any) -> HistoryRow:
    base = HistoryRow(
        device_id="kitchen-thermostat",
        version=7,
        event_id=uuid.UUID("6513270e-269e-4d37-b2a7-4de452e6b438"),
        type="device.state_reported",
        home_id="home-1",
        occurred_at=datetime(2026, 11, 28, 10, 15, 56, 123456, tzinfo=UTC),
        recorded_at=datetime(2026, 11, 28, 10, 15, 56, 654321, tzinfo=UTC),
        correlation_id=None,
        event=b'{"type":"device.state_reported","payload":{"reported":{"ambient_c":21.5}}}',
    )
    return base._replace(**changes)


def test_the_rows_are_encoded_as_psycopg_encodes_them() -> None:
    rows = [
        row(),
        row(version=2**62, correlation_id=uuid.UUID(int=2**128 - 1)),
        row(occurred_at=datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),  # before PostgreSQL's epoch
        row(recorded_at=datetime(2026, 3, 29, 3, 0, 0, 1, tzinfo=timezone(timedelta(hours=2)))),  # not UTC
        row(home_id="", event='{"name":"Küche ☃"}'.encode()),  # empty and non-ASCII fields
    ]
    assert encode_history(rows) == psycopg_copy(rows)


def test_no_rows_is_a_whole_copy_stream_too() -> None:
    assert encode_history([]) == psycopg_copy([])


def test_a_timestamp_without_a_zone_is_left_to_psycopg() -> None:
    assert encode_history([row(), row(occurred_at=datetime(2026, 11, 28, 10, 0))]) is None
