"""The history's rows (``HistoryRow``) as one PostgreSQL binary COPY stream, built here in one buffer per
batch instead of by one psycopg call per row.

Why: a rebuild COPYs one history row per journal fact, and psycopg's ``Copy.write_row`` costs a few
microseconds of Python per row around its C formatter (the async wrapper, the transformer, the buffer
checks); here a row is a handful of ``struct.pack`` calls and byte joins, and the whole batch goes in
one ``copy.write``. The format is PostgreSQL's own (the "Binary Format" of COPY): a signature, flags
and header extension, then per row the field count and each field as a 32-bit length (-1: NULL) and
its bytes in the type's binary send format, then -1 as the trailer.

The fields are encoded by the types the history's columns are COPYed as (``HISTORY_TYPES``, in
``HistoryRow``'s order); the layout is written out in ``history_stream`` for speed, and checked against
``HISTORY_TYPES`` at import, so a column added to the row without its encoding here fails loudly. The test
``test_history_copy.py`` COPYs rows both ways (psycopg's ``write_row`` and this stream) into PostgreSQL
and compares what it reads back.

Repeated texts (device ids, home ids, fact types) are encoded once and cached (bounded).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hearth_read_models.projection import HISTORY_TYPES, HistoryRow

SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
HEADER = SIGNATURE + struct.pack(">ii", 0, 0)  # no OIDs, no header extension
TRAILER = struct.pack(">h", -1)
NULL = struct.pack(">i", -1)
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # timestamptz: microseconds since this instant
PG_EPOCH_NAIVE = PG_EPOCH.replace(tzinfo=None)  # a naive datetime is taken as UTC
MICROSECOND = timedelta(microseconds=1)
MAX_CACHED_TEXTS = 100_000

_int8 = struct.Struct(">iq").pack
_uuid = struct.Struct(">i16s").pack
_length = struct.Struct(">i").pack
_texts: dict[str, bytes] = {}


def _text(value: str) -> bytes:
    field = _texts.get(value)
    if field is None:
        if len(_texts) >= MAX_CACHED_TEXTS:
            _texts.clear()
        data = value.encode()
        field = _texts[value] = _length(len(data)) + data
    return field


def _timestamptz(value: datetime) -> bytes:
    base = PG_EPOCH if value.tzinfo is not None else PG_EPOCH_NAIVE
    return _int8(8, (value - base) // MICROSECOND)


_FIELD_COUNT = struct.pack(">h", len(HistoryRow._fields))
# the row layout below is written out for speed; it must be the one HISTORY_TYPES says
_LAYOUT = ("text", "int8", "uuid", "text", "text", "timestamptz", "timestamptz", "uuid", "bytea")
if HISTORY_TYPES != _LAYOUT or len(HistoryRow._fields) != len(_LAYOUT):
    raise RuntimeError(f"history_copy encodes {_LAYOUT}, but the history is COPYed as {HISTORY_TYPES}")


def history_stream(rows: Sequence[HistoryRow]) -> bytes:
    """``rows`` as a whole binary COPY stream (header, rows, trailer)."""
    text, timestamptz, int8, length = _text, _timestamptz, _int8, _length
    parts = [HEADER]
    append = parts.append
    for device_id, version, event_id, type_, home_id, occurred_at, recorded_at, correlation_id, event in rows:
        append(_FIELD_COUNT)
        append(text(device_id))
        append(int8(8, version))
        append(_uuid(16, event_id.bytes))
        append(text(type_))
        append(text(home_id))
        append(timestamptz(occurred_at))
        append(timestamptz(recorded_at))
        append(NULL if correlation_id is None else _uuid(16, correlation_id.bytes))
        append(length(len(event)))
        append(event)
    append(TRAILER)
    return b"".join(parts)
