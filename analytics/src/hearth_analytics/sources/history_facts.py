"""The daily report's facts from the history (``hearth_analytics.sources.history``): one flat row per fact,
with only the columns the report reads, decoded from each source the cheap way it allows.

* The archive: the envelope is already typed columns (``type``, ``device_id``, ``home_id``, ``version``,
  ``occurred_at``), and so are a state report's readings and device time (``archive_layout``: one typed
  column per declared key): a reading is read from its columns, with no JSON parse. The ``payload``
  column (the payload's JSON text) is parsed only for the other fact types a figure needs
  (``PARSED_TYPES``: anomalies, commands, registrations), and for a state report whose text the archive
  kept (a key no type declares, or a value its column cannot hold: parsed, it reads exactly as the
  journal's record does) or that an archive of the first layout holds (no typed columns: its
  ``archive_layout`` is null). The other facts are counted, never parsed; the record bytes (``value``)
  are not read at all.
* The journal (its tail beyond the archive, or all of it without one): each record's value is parsed
  once, with the envelope and the same slim payload schema.

Both then go through ``_report_columns``, so the archive and the tail give the same columns with the same
rules (ids by ``IDENTIFIER_PATTERN``, a non-finite number read as null, ``event_time``) as
``schema.parse_journal`` applies; ``tests/integration/test_archive_history.py`` compares archive plus tail
with the journal alone, ``test_archive_layouts.py`` an archive of both layouts. Why not ``parse_journal``
over ``read_history``: it decoded every fact's whole value (429 bytes on average in the bench) into a
wide struct and cached that, which did not fit in a 2 GB driver at 5 million facts; the archive then
saved nothing over Kafka (123 s against 127 s).

Non-finite numbers: both parses accept ``NaN`` and ``Infinity`` literals (``allowNonNumericNumbers``, as
the archive job's own parse does), and ``schema.finite`` reads them, and ``1e999``, as null, field by
field (the typed columns hold them as the job parsed them, and go through the same ``finite``).
``parse_journal`` refuses the literals instead, and Jackson then stops reading the record there: the
whole payload turned null, and since the archive's envelope was parsed with the literals allowed, the
archive and the journal would disagree on such a fact (the other fields of its payload). The payload
schema holds only what the reports read: the daily report (``batch``) and the runtime report
(``runtime_report``: a thermostat's ``target_c``, ``panel_changes`` and ``time_zone`` besides its metrics
and ``hvac_action``).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.archive_layout import LAYOUT_COLUMN, READING_COLUMNS
from hearth_analytics.sources.history import history_sources
from hearth_analytics.sources.schema import (
    ANOMALY_DETECTED,
    COMMAND_OUTCOMES,
    COMMAND_REQUESTED,
    DEVICE_REGISTERED,
    METRICS,
    STATE_KEYS,
    STATE_REPORTED,
    envelope_struct,
    finite,
)
from hearth_shared.schema.ids import IDENTIFIER_PATTERN

# The fact types whose payload a figure reads; every other fact is only counted.
PARSED_TYPES = (STATE_REPORTED, ANOMALY_DETECTED, DEVICE_REGISTERED, COMMAND_REQUESTED, *COMMAND_OUTCOMES)
TEXT_KEYS = STATE_KEYS  # reported text keys: the ones minutes and counts are figured from
# What else the runtime report reads of a thermostat's reports (hearth_analytics.jobs.runtime_report).
RUNTIME_KEYS = (("target_c", DoubleType()), ("panel_changes", LongType()), ("time_zone", StringType()))

_REPORTED = StructType(
    [
        *(StructField(m, DoubleType()) for m in METRICS),
        *(StructField(k, StringType()) for k in TEXT_KEYS),
        *(StructField(k, kind) for k, kind in RUNTIME_KEYS),
    ]
)
_PAYLOAD = StructType(
    [
        StructField("device_type", StringType()),  # device.registered
        StructField("reported", _REPORTED),  # device.state_reported
        StructField("device_time", StringType()),  # device.state_reported, anomaly.detected
        StructField("command_id", StringType()),  # command.*
    ]
)
_ENVELOPE_NAMES = ("type", "device_id", "home_id", "version", "occurred_at")
_JOURNAL = StructType([*envelope_struct(*_ENVELOPE_NAMES).fields, StructField("payload", _PAYLOAD)])
_OPTIONS = {"allowNonNumericNumbers": "true"}  # then read as null by ``finite``

# The archive's typed column of each reported key the reports read; a key without one (two types
# declare it with different JSON types) makes every state report parse its payload text.
_COLUMN_OF = {r.key: r.column for r in READING_COLUMNS}
_READ_TYPED = all(f.name in _COLUMN_OF for f in _REPORTED.fields)
_TYPED_COLUMNS = tuple(dict.fromkeys(_COLUMN_OF[f.name] for f in _REPORTED.fields if f.name in _COLUMN_OF))

# The columns every row has, in order (the report's rules read these and nothing else).
FACT_COLUMNS = (
    *_ENVELOPE_NAMES, "event_time", "command_id", "device_type", *METRICS, *TEXT_KEYS,
    *(k for k, _ in RUNTIME_KEYS),
)  # fmt: skip


def _ts(column: Column) -> Column:
    return column.try_cast("timestamp")  # as schema.parse_journal: null if malformed


# A payload field's column by its path in ``_PAYLOAD`` ("command_id", "reported.power").
PayloadField = Callable[[str], Column]


def _report_columns(
    rows: DataFrame, payload: PayloadField, device_time: Column, keep: tuple[str, ...] = ()
) -> DataFrame:
    """Rows with the envelope's columns, and each payload field (``_PAYLOAD``'s, null where the fact has
    none) by ``payload`` -> ``FACT_COLUMNS`` (then the ``keep`` columns of ``rows`` as they are); a fact
    without a type or with an id that breaks the pattern is left out. Flat: each field is read, and a
    number made finite, on its own; no payload struct is built (on the archive, building one per row and
    rebuilding it finite took a fifth of the report's read: 2.8 s against 2.3 s for 1,075,369 facts,
    measured 2026-11-28)."""

    def reading(field: StructField) -> Column:
        value = payload(f"reported.{field.name}")
        return (finite(value) if isinstance(field.dataType, DoubleType) else value).alias(field.name)

    return rows.where(
        F.col("type").isNotNull()
        & F.col("device_id").rlike(IDENTIFIER_PATTERN)
        & F.col("home_id").rlike(IDENTIFIER_PATTERN)
    ).select(
        *_ENVELOPE_NAMES,
        F.coalesce(device_time, F.col("occurred_at")).alias("event_time"),
        payload("command_id").alias("command_id"),
        payload("device_type").alias("device_type"),
        *(reading(f) for f in _REPORTED.fields),
        *keep,
    )


def _typed_reading(name: str) -> Column:
    """A reported key from the archive's typed column, as the report reads it (``_REPORTED``'s type)."""
    column = _COLUMN_OF.get(name)
    value = F.lit(None) if column is None else F.col(column)
    return value.try_cast(_REPORTED[name].dataType)


def archive_facts(table: DataFrame, keep: tuple[str, ...] = ()) -> DataFrame:
    """Archive rows (either layout, read with ``ARCHIVE_SCHEMA``) -> ``FACT_COLUMNS``: a state report's
    typed columns where the archive holds it all in them, the payload text parsed where it is needed;
    then the ``keep`` columns of ``table`` as they are."""
    typed = (
        F.col(LAYOUT_COLUMN).isNotNull() & (F.col("type") == STATE_REPORTED) & F.col("payload").isNull()
        if _READ_TYPED
        else F.lit(False)
    )
    parse = F.col("type").isin(*PARSED_TYPES) & ~typed
    rows = table.select(
        *_ENVELOPE_NAMES,
        typed.alias("typed"),
        F.col("device_time").alias("typed_time"),
        *_TYPED_COLUMNS,
        F.when(parse, F.from_json(F.col("payload"), _PAYLOAD, _OPTIONS)).alias("parsed"),
        *keep,
    )

    def payload(path: str) -> Column:
        parsed = F.col(f"parsed.{path}")  # null for a typed row: it was not parsed
        if not path.startswith("reported."):
            return parsed
        return F.when(F.col("typed"), _typed_reading(path.removeprefix("reported."))).otherwise(parsed)

    device_time = F.when(F.col("typed"), F.col("typed_time")).otherwise(_ts(F.col("parsed.device_time")))
    return _report_columns(rows, payload, device_time, keep)


def journal_facts(raw: DataFrame) -> DataFrame:
    """Kafka source rows -> ``FACT_COLUMNS``: each value parsed once, envelope and slim payload."""
    fact = F.from_json(F.col("value").cast("string"), _JOURNAL, _OPTIONS)
    envelope = raw.select(fact.alias("f")).select(
        *(F.col(f"f.{name}").alias(name) for name in _ENVELOPE_NAMES if name != "occurred_at"),
        _ts(F.col("f.occurred_at")).alias("occurred_at"),
        F.col("f.payload").alias("p"),
    )
    return _report_columns(envelope, lambda path: F.col(f"p.{path}"), _ts(F.col("p.device_time")))


def read_history_facts(spark: SparkSession, settings: AnalyticsSettings) -> DataFrame:
    """The whole history (archive, then the journal's tail) as ``FACT_COLUMNS``."""
    sources = history_sources(spark, settings)
    tail = journal_facts(sources.journal)
    return tail if sources.archive is None else archive_facts(sources.archive).unionByName(tail)
