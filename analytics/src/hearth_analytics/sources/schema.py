"""Journal records as Spark sees them: the Kafka source, and the JSON value parsed with ``from_json``.

Only the envelope and the payload fields the jobs use are in the schema; everything else in a record is
ignored. Timestamps are read as strings and cast with ``try_cast`` (null if malformed; msgspec writes
RFC 3339 with ``Z`` and up to 6 fraction digits), in the session time zone UTC. A value that is not a
journal record (no ``type``) is left out. If an upcaster (``hearth_shared.schema.events.register_upcaster``)
ever renames a field used here, this schema must follow it: Spark reads the JSON, not the Python structs.

Poison facts (the platform's consumers dead-letter them) are left out or neutralised here, once, so no
job fails or publishes a poisoned result: a value that is not JSON, or whose device or home id breaks
``hearth_shared.schema.ids.IDENTIFIER_PATTERN`` (a NUL, a space...), is left out; a number that is not finite
(a ``NaN`` or ``Infinity`` literal, which JSON does not have, or ``1e999``, too large for a double) is
read as null, as a value of the wrong type is (``from_json``), so no mean or model turns NaN.
"""

from __future__ import annotations

from typing import TypeVar

from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.readwriter import DataStreamReader
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from hearth_analytics.settings import AnalyticsSettings
from hearth_shared.domain.registry import counted_state_keys, rollup_metrics
from hearth_shared.schema.ids import IDENTIFIER_PATTERN

STATE_REPORTED = "device.state_reported"
DEVICE_REGISTERED = "device.registered"
ANOMALY_DETECTED = "anomaly.detected"
COMMAND_REQUESTED = "command.requested"
COMMAND_OUTCOMES = {  # terminal command facts -> outcome
    "command.converged": "converged",
    "command.failed": "failed",
    "command.rejected": "rejected",
    "command.expired": "expired",
    "command.superseded": "superseded",
}


def reported_struct() -> StructType:
    """The reported keys the jobs read, as the device types declare them (``hearth_shared.domain``): the
    numbers they roll up (``StateKey.rollup``, read as doubles) and the text keys of their minutes and
    counts. A new type's keys are columns with no edit here; a key no figure reads is not parsed."""
    return StructType(
        [
            *(StructField(m, DoubleType()) for m in rollup_metrics()),
            *(StructField(k, StringType()) for k in counted_state_keys()),
        ]
    )


# Numeric telemetry summarised in rollups and reports (mean, min, max, count), and the text keys that
# minutes and counts are figured from.
METRICS = rollup_metrics()
STATE_KEYS = counted_state_keys()
REPORTED = reported_struct()

PAYLOAD = StructType(
    [
        StructField("device_type", StringType()),  # device.registered
        StructField("reported", REPORTED),  # device.state_reported
        StructField("device_seq", LongType()),
        StructField("device_time", StringType()),  # device.state_reported, anomaly.detected
        StructField("command_id", StringType()),  # command.*
        StructField("name", StringType()),
        StructField("reason", StringType()),
        StructField("metric", StringType()),  # anomaly.detected
        StructField("value", DoubleType()),
        StructField("score", DoubleType()),
        StructField("model_version", LongType()),
    ]
)

# Every envelope field a job reads, with its Spark type: each job's envelope is derived from this one
# table (``envelope_struct``), so a field is typed once for the analytics, the archive and the backtest.
ENVELOPE_TYPES = {
    "event_id": StringType(),
    "type": StringType(),
    "schema_version": IntegerType(),
    "device_id": StringType(),
    "home_id": StringType(),
    "version": LongType(),
    "occurred_at": StringType(),
    "recorded_at": StringType(),
    "causation_id": StringType(),
    "correlation_id": StringType(),
}


def envelope_struct(*names: str) -> StructType:
    """The envelope fields ``names``, in that order, typed as ``ENVELOPE_TYPES`` says."""
    return StructType([StructField(name, ENVELOPE_TYPES[name]) for name in names])


ENVELOPE = StructType(
    [
        *envelope_struct(
            "event_id", "type", "schema_version", "device_id", "home_id", "version", "occurred_at",
            "recorded_at", "correlation_id",
        ).fields,
        StructField("payload", PAYLOAD),
    ]
)  # fmt: skip


_Reader = TypeVar("_Reader", DataFrameReader, DataStreamReader)


def _kafka(reader: _Reader, settings: AnalyticsSettings, topic: str) -> _Reader:
    return (
        reader.format("kafka")
        .option("kafka.bootstrap.servers", settings.stack.kafka_bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )


def read_topic(spark: SparkSession, settings: AnalyticsSettings, topic: str) -> DataFrame:
    """A whole topic, from the earliest to the latest offsets at the time of the call (a batch)."""
    return _kafka(spark.read, settings, topic).option("endingOffsets", "latest").load()


def read_journal(spark: SparkSession, settings: AnalyticsSettings) -> DataFrame:
    return read_topic(spark, settings, settings.stack.topics.journal)


def stream_journal(
    spark: SparkSession, settings: AnalyticsSettings, max_offsets_per_trigger: int | None = None
) -> DataFrame:
    """The journal as a stream, from the earliest offset on first start (then from the checkpoint)."""
    reader = _kafka(spark.readStream, settings, settings.stack.topics.journal)
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets_per_trigger)
    return reader.load()


def finite(column: Column) -> Column:
    """The value if it is a finite double, else null (NaN compares above every number in Spark)."""
    return F.when(column.between(-_MAX_DOUBLE, _MAX_DOUBLE), column)


_MAX_DOUBLE = 1.7976931348623157e308


def finite_struct(struct: Column, schema: StructType) -> Column:
    """``struct`` rebuilt once, with every double that is not finite read as null (a null stays null).

    One ``F.struct`` over the fields, each read from ``struct`` once, so the expression grows with the
    number of fields. Chaining one ``withField`` per number instead put the struct built so far into the
    next number's expression several times (the range test, the value, the rest of the struct): it grew
    by a factor per number. With the seven doubles of the light's schema the parse plan was 1.5 MB of
    text (7 MB optimized; 3 KB this way), Spark's generated code outgrew 64 KB and the rollups query died
    of a Java heap OutOfMemoryError in code generation. ``test_poison_analytics`` guards the growth."""
    fields = []
    for f in schema.fields:
        value = struct[f.name]
        if isinstance(f.dataType, DoubleType):
            value = finite(value)
        elif isinstance(f.dataType, StructType):
            value = finite_struct(value, f.dataType)
        fields.append(value.alias(f.name))
    return F.when(struct.isNotNull(), F.struct(*fields))


def _ts(column: Column) -> Column:
    return column.try_cast("timestamp")  # ANSI mode (Spark 4's default) would fail the query on a bad one


def parse_journal(raw: DataFrame) -> DataFrame:
    """Kafka rows -> one row per fact: the envelope, ``payload`` (a struct) and ``event_time``.

    ``event_time`` is the device's clock for readings and anomalies (``payload.device_time``), else
    ``occurred_at``.
    """
    fact = F.from_json(F.col("value").cast("string"), ENVELOPE, {"allowNonNumericNumbers": "false"})
    return (
        raw.select(F.col("partition"), F.col("offset"), fact.alias("f"))
        .where(
            F.col("f.type").isNotNull()
            & F.col("f.device_id").rlike(IDENTIFIER_PATTERN)
            & F.col("f.home_id").rlike(IDENTIFIER_PATTERN)
        )
        .select(
            "partition",
            "offset",
            F.col("f.type").alias("type"),
            F.col("f.device_id").alias("device_id"),
            F.col("f.home_id").alias("home_id"),
            F.col("f.version").alias("version"),
            _ts(F.col("f.occurred_at")).alias("occurred_at"),
            _ts(F.col("f.recorded_at")).alias("recorded_at"),
            F.col("f.correlation_id").alias("correlation_id"),
            finite_struct(F.col("f.payload"), PAYLOAD).alias("payload"),
        )
        .withColumn("event_time", F.coalesce(_ts(F.col("payload.device_time")), F.col("occurred_at")))
    )


def readings(facts: DataFrame) -> DataFrame:
    """``device.state_reported`` facts, flattened: what the device said (only the keys that changed)."""
    return facts.where(F.col("type") == STATE_REPORTED).select(
        "home_id",
        "device_id",
        "version",
        "event_time",
        "recorded_at",
        *(F.col(f"payload.reported.{m}").alias(m) for m in METRICS),
        *(F.col(f"payload.reported.{k}").alias(k) for k in STATE_KEYS),
    )
