"""The archive table's columns (``hearth_analytics.jobs.archive`` writes them), with the readings' typed
columns derived from the device types' declarations (``hearth_shared.domain.registry``): a new type, or a new
key of a type, is a new column with no edit here.

Layout 2 (``LAYOUT``, written in every row's ``archive_layout``; issue 24):

* where the record is: ``kafka_partition``, ``kafka_offset``, ``kafka_timestamp``;
* the envelope, typed: ``event_id``, ``type``, ``schema_version``, ``device_id``, ``home_id``,
  ``version``, ``occurred_at``, ``recorded_at``, ``causation_id``, ``correlation_id``;
* a state report's own fields: ``device_seq`` (bigint) and ``device_time`` (timestamp), null for other
  facts;
* one column per reported key any type declares (``READING_COLUMNS``): ``reported__<key>``, typed from
  the declaration's JSON type (number: double, integer: bigint, string: string, boolean: boolean), null
  when the report does not carry the key (a report carries the keys that changed);
* ``payload``: the payload's JSON text, only where the columns do not hold it all: every fact other than
  a state report, and a state report with a key no type declares, a value its column cannot hold (text
  for a number), or a field beyond ``reported``, ``device_seq`` and ``device_time``. Such a report keeps
  its whole payload text (not a remainder: the text stays exactly what the device said, and a reader
  needs no merge); its declared keys are in their columns too. Null when the columns hold everything;
* ``value``: the record's exact bytes (a rebuild, the retrain and the backtest decode the fact from them,
  as from Kafka);
* ``archive_layout`` (2), and ``day``, the partition column, last.

Why one column per key over every type, rather than a column or a struct per type
(``thermostat__ambient_c``): a ``device.state_reported`` fact does not name its device's type (only
``device.registered`` does), so a column per type would need the archive job to remember every device's
type across micro-batches (streaming state, with nothing for a device registered before the archive
began). A key name means one thing across the types that declare it (``firmware_version`` is every
type's): readers select rows by ``device_id`` or the registered type anyway. A key two types declare
with different JSON types has no column (a column has one type): its value stays in the payload text.
A key's declared type must not change once archived (a new key name instead): Parquet readers do not
widen every type.

Layout 1 (archives written before issue 24): the same envelope columns, ``payload`` whole for every fact
and ``value``, no typed columns and no ``archive_layout``. ``ARCHIVE_SCHEMA`` reads both: a reader that
gives it to Spark (``history.read_archive``) gets the typed columns and ``archive_layout`` as nulls in
old rows, so a null ``archive_layout`` means "parse the payload" (``history_facts``); verify and rebuild
read only ``kafka_partition``, ``kafka_offset`` and ``value``, the same in both.

Pure declarations and Spark's type objects (no session).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from hearth_analytics.sources.schema import envelope_struct
from hearth_shared.domain.device_type import DeviceType
from hearth_shared.domain.registry import DEVICE_TYPES

LAYOUT = 2
LAYOUT_COLUMN = "archive_layout"
PARTITION_COLUMN = "day"
READING_PREFIX = "reported__"
# A state report's payload fields that have columns of their own (``reported`` is spread over
# ``READING_COLUMNS``); a payload with any other field keeps its text.
STATE_FIELDS = ("reported", "device_seq", "device_time")

SPARK_TYPES: dict[str, DataType] = {
    "number": DoubleType(),
    "integer": LongType(),
    "string": StringType(),
    "boolean": BooleanType(),
}
_COLUMN_NAME = re.compile(r"^[a-z][a-z0-9_]*$")  # a key that is not one is left in the payload text

ENVELOPE_NAMES = (
    "event_id", "type", "schema_version", "device_id", "home_id", "version", "occurred_at", "recorded_at",
    "causation_id", "correlation_id",
)  # fmt: skip
TIMESTAMP_NAMES = ("occurred_at", "recorded_at")


@dataclass(frozen=True)
class ReadingColumn:
    """A reported key's typed column."""

    key: str
    column: str
    type: DataType


def reading_columns(types: Iterable[DeviceType]) -> tuple[ReadingColumn, ...]:
    """A column per reported key the types declare (shared keys first, then each type's in order), unless
    two types declare the key with different JSON types."""
    declared: dict[str, set[str]] = {}
    for kind in types:
        for key in kind.all_state:
            declared.setdefault(key.name, set()).add(key.value.type)
    return tuple(
        ReadingColumn(name, READING_PREFIX + name, SPARK_TYPES[next(iter(kinds))])
        for name, kinds in declared.items()
        if len(kinds) == 1 and _COLUMN_NAME.match(name)
    )


READING_COLUMNS = reading_columns(DEVICE_TYPES.values())


def archive_schema(readings: tuple[ReadingColumn, ...]) -> StructType:
    """The table's columns in the sink's order (layout 2; layout 1 is a subset of them)."""
    envelope = [
        StructField(f.name, TimestampType() if f.name in TIMESTAMP_NAMES else f.dataType)
        for f in envelope_struct(*ENVELOPE_NAMES).fields
    ]
    return StructType(
        [
            StructField("kafka_partition", IntegerType()),
            StructField("kafka_offset", LongType()),
            StructField("kafka_timestamp", TimestampType()),
            *envelope,
            StructField("device_seq", LongType()),
            StructField("device_time", TimestampType()),
            *(StructField(r.column, r.type) for r in readings),
            StructField("payload", StringType()),
            StructField("value", BinaryType()),
            StructField(LAYOUT_COLUMN, IntegerType()),
            StructField(PARTITION_COLUMN, DateType()),
        ]
    )


ARCHIVE_SCHEMA = archive_schema(READING_COLUMNS)
ARCHIVE_COLUMNS = tuple(f.name for f in ARCHIVE_SCHEMA.fields)
