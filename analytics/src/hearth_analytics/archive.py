"""``python -m hearth_analytics archive``: every journal fact, once, in a columnar table (Parquet).

One Structured Streaming query (``hearth-archive``) reads the journal topic with Spark's Kafka source and
appends each record, as one row, to a Parquet table at ``settings.archive_url`` (a local directory by
default; ``s3a://bucket/path`` on an object store), partitioned by ``day``. Columns (``ARCHIVE_COLUMNS``):

* ``day`` (partition, a date): the UTC date of the Kafka record's timestamp (the producer's create time,
  the moment the actor journaled the fact). Taken from Kafka rather than from the JSON so a record that
  is not valid JSON still has a day and is still archived: the archive holds every offset, poison too.
* ``kafka_partition``, ``kafka_offset``, ``kafka_timestamp``: where the fact is in the journal (what
  ``hearth archive verify`` compares).
* the envelope as typed columns: ``event_id``, ``type``, ``schema_version``, ``device_id``, ``home_id``,
  ``version``, ``occurred_at``, ``recorded_at`` (timestamps, null if malformed), ``causation_id``,
  ``correlation_id``;
* ``payload``: the fact's payload, whole, as JSON text (for readers such as DuckDB's ``json_extract``, and
  the daily report: ``hearth_analytics.history_facts`` reads the typed envelope and parses only this);
* ``value``: the record's exact bytes. Jobs that need the fact as the platform wrote it (the retrain, the
  backtest, a rebuild) read these, so a fact read from the archive decodes exactly as one read from Kafka.

Why Parquet with Spark's file-sink commit log, not Delta Lake or Iceberg (tried on 2026-11-24 with the
project's PySpark 4.3.0): the newest Delta Lake on Maven Central, ``io.delta:delta-spark_2.13:4.4.0``, is
built against Spark 4.2.0; its batch writer works on 4.3.0 but its streaming sink fails at the first
micro-batch (``NoSuchMethodError: LogicalRDD.<init>``, a binary change in Spark 4.3). Apache Iceberg's
Spark runtimes stop at Spark 4.1 (``iceberg-spark-runtime-4.1_2.13:1.12.0``; none for 4.2 or 4.3), and an
Iceberg runtime only runs on the Spark minor it was built for. Plain Parquet needs no extra jar.

Exactly once, also across a kill -9: the query's checkpoint (``<checkpoint_dir>/archive``) records each
micro-batch's Kafka offsets before it runs, and the file sink records the files a micro-batch wrote in
``<table>/_spark_metadata/<batch id>`` only once they are all written; a restarted query re-runs an
unfinished micro-batch with the same offsets, and a batch id already in the sink's log is not written
again. Files a killed micro-batch left behind are in no log entry and are not part of the table: Spark
reads the table through ``_spark_metadata``, other tools through ``hearth_analytics.archive_table``
(which lists the committed files; pyarrow and DuckDB then read those).

Each value is parsed once: ``from_json`` reads the envelope's fields and the payload as a string field,
which Spark fills with the payload's JSON text (the same text ``get_json_object(value, '$.payload')``
gives: checked equal on 430,208 bench facts), instead of a second parse of every value for the payload.

Small files: each micro-batch is written as one file per day it touches (``coalesce(1)``: one task, so
the job takes one core of a machine it shares with the platform; parsing and zstd make it CPU-bound), and
the trigger interval (``archive_trigger_s``, 30 s) bounds the file count at about 2,900 a day. Closed
days are then rewritten as one file each (``archive_compact``, which says how that stays consistent with
the sink's commit log): every ``archive_compact_every_s`` by the job itself (a local archive; a failed
compaction is logged and archiving goes on), or by ``hearth archive compact``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StringType, StructField, StructType

from hearth_analytics.archive_compact import compact_archive
from hearth_analytics.schema import envelope_struct, stream_journal
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.spark import build_session

log = logging.getLogger(__name__)

ARCHIVE_QUERY = "hearth-archive"
PARTITION_COLUMN = "day"

_ENVELOPE = envelope_struct(
    "event_id", "type", "schema_version", "device_id", "home_id", "version", "occurred_at", "recorded_at",
    "causation_id", "correlation_id",
)  # fmt: skip
_TIMESTAMPS = ("occurred_at", "recorded_at")
_PARSED = StructType([*_ENVELOPE.fields, StructField("payload", StringType())])  # one parse per value

# The table's columns, in order (the partition column ``day`` last, as Spark's file sink writes it).
ARCHIVE_COLUMNS = (
    "kafka_partition",
    "kafka_offset",
    "kafka_timestamp",
    *(f.name for f in _ENVELOPE.fields),
    "payload",
    "value",
    PARTITION_COLUMN,
)


def _envelope_column(name: str, envelope: Column) -> Column:
    column = envelope[name]
    return (column.try_cast("timestamp") if name in _TIMESTAMPS else column).alias(name)


def archive_rows(raw: DataFrame) -> DataFrame:
    """Kafka source rows -> archive rows (``ARCHIVE_COLUMNS``); every record gives one row."""
    parsed = F.from_json(F.col("value").cast("string"), _PARSED)
    return raw.select(
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        *(_envelope_column(f.name, parsed) for f in _ENVELOPE.fields),
        parsed["payload"].alias("payload"),  # a string field keeps the payload's JSON text
        F.col("value"),
        F.to_date(F.col("timestamp")).alias(PARTITION_COLUMN),  # the session time zone is UTC
    )


def start_archive(spark: SparkSession, settings: AnalyticsSettings, *, once: bool = False) -> StreamingQuery:
    raw = stream_journal(spark, settings, settings.archive_max_offsets_per_trigger)
    writer = (
        archive_rows(raw)
        .coalesce(1)
        .writeStream.queryName(ARCHIVE_QUERY)
        .format("parquet")
        .option("compression", "zstd")
        .option("checkpointLocation", settings.archive_checkpoint())
        .partitionBy(PARTITION_COLUMN)
        .outputMode("append")
    )
    writer = (
        writer.trigger(availableNow=True)
        if once
        else writer.trigger(processingTime=f"{settings.archive_trigger_s} seconds")
    )
    return writer.start(settings.archive_location())


def run_archive(
    settings: AnalyticsSettings, *, once: bool = False, spark: SparkSession | None = None
) -> None:
    """Archive the journal until Ctrl-C (``once``: what the journal holds now, then return)."""
    spark = spark or build_session(settings, "hearth-analytics-archive")
    query = start_archive(spark, settings, once=once)
    log.info("started %s into %s (checkpoint %s)", query.name, settings.archive_location(),
             settings.archive_checkpoint())  # fmt: skip
    every = settings.archive_compact_every_s
    try:
        if once or not every or not settings.archive_is_local():
            query.awaitTermination()
        else:
            while not query.awaitTermination(max(1, round(every))):
                compact_step(Path(settings.archive_location()))
    finally:
        if query.isActive:
            query.stop()


def compact_step(table: Path) -> None:
    """The job's periodic compaction: logged, and never the end of archiving."""
    try:
        result = compact_archive(table)
    except Exception:
        log.exception("compacting %s failed; archiving goes on", table)
        return
    for day in result.days:
        log.info("compacted %s: %d files into one (%d rows)", day.day, day.files, day.rows)
    if result.undone:
        log.info("compaction of %s was undone by the sink's own log compaction; again next time", table)
