"""``python -m hearth_analytics archive``: every journal fact, once, in a columnar table (Parquet).

One Structured Streaming query (``hearth-archive``) reads the journal topic with Spark's Kafka source and
appends each record, as one row, to a Parquet table at ``settings.archive_url`` (a local directory by
default; ``s3a://bucket/path`` on an object store), partitioned by ``day``: the UTC date of the Kafka
record's timestamp (the producer's create time, the moment the actor journaled the fact). Taken from
Kafka rather than from the JSON so a record that is not valid JSON still has a day and is still
archived: the archive holds every offset, poison too.

The columns are ``hearth_analytics.sources.archive_layout``'s (its docstring says what each holds and why):
where the record is in the journal, the envelope as typed columns, a state report's ``device_seq`` and
``device_time``, one typed column per reported key the device types declare (``reported__ambient_c``...),
the payload's JSON text only where those columns do not hold it all, the record's exact bytes
(``value``), and the layout's number.

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
reads the table through ``_spark_metadata``, other tools through
``hearth_analytics.archive_files.archive_table`` (which lists the committed files; pyarrow and DuckDB
then read those).

Parsing: each value is parsed once for the envelope, with the payload as a string field (Spark fills it
with the payload's JSON text: checked equal to ``get_json_object(value, '$.payload')`` on 430,208 bench
facts). A state report's payload text is then parsed as a map of texts, and its ``reported`` text as
another: the maps' sizes against the columns filled say whether every field has a column (else the
payload text is kept; ``_held_by_columns``), and each declared key's text is cast to its column's type
(``try_cast``: a text that does not fit is null, and keeps the payload). A text key holds the value's
text (a number reported for it, its digits), as the report's own parse always read it. Two small parses
of the payload, only for state reports, and no Python: the job stays in the JVM.

One task per journal partition: the Kafka source makes one Spark partition per Kafka partition of the
micro-batch's offset range (``minPartitions`` unset), and nothing here merges them (until issue 24 a
``coalesce(1)`` did: one task per micro-batch, one core). Each task writes one file per day its rows
touch, so a micro-batch writes at most (journal partitions x days) files, each holding one journal
partition (a rebuild's share then skips the others' files by their statistics). The trigger interval
(``archive_trigger_s``, 30 s) bounds the count at about 2,900 per partition and day. Closed days are
then rewritten as one file each (``archive_compact``, which says how that stays consistent with the
sink's commit log): every ``archive_compact_every_s`` by the job itself (a failed compaction is logged
and archiving goes on), or by ``hearth archive compact``; locally and on S3 alike.
"""

from __future__ import annotations

import logging

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import MapType, StringType, StructField, StructType

from hearth_analytics.archive_files.archive_compact import compact_archive
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.archive_layout import (
    ENVELOPE_NAMES,
    LAYOUT,
    LAYOUT_COLUMN,
    PARTITION_COLUMN,
    READING_COLUMNS,
    STATE_FIELDS,
    TIMESTAMP_NAMES,
)
from hearth_analytics.sources.schema import STATE_REPORTED, envelope_struct, stream_journal
from hearth_analytics.spark import build_session
from hearth_shared.adapters.archive_store import ArchiveStore, open_store

log = logging.getLogger(__name__)

ARCHIVE_QUERY = "hearth-archive"
# zstd's level 1 rather than Parquet's default 3: on 645,262 bench facts the write took 2.5 s against 3.4 s
# over the rows' own 5.9 s, and the files came out smaller (51.6 against 55.6 MB; snappy: 2.2 s, 104.6
# MB). The compaction's pyarrow writer uses zstd's level 1 too (Arrow's default).
ZSTD_LEVEL = "1"

_ENVELOPE = envelope_struct(*ENVELOPE_NAMES)
_PARSED = StructType([*_ENVELOPE.fields, StructField("payload", StringType())])  # one parse per value
_TEXTS = MapType(StringType(), StringType())  # a JSON object's fields as their texts


def _envelope_column(name: str) -> Column:
    column = F.col(f"f.{name}")
    return (column.try_cast("timestamp") if name in TIMESTAMP_NAMES else column).alias(name)


def _held_by_columns() -> Column:
    """Whether a state report's columns hold its whole payload (then its text is not kept): its
    ``device_seq`` and ``device_time`` have their columns, its payload has no other field, and every key
    of ``reported`` filled its column. Counted, not compared key by key: a reading column is non-null only
    when its key is in ``reported`` (a map: each key once) and its value fits, so the report's keys number
    its non-null columns exactly when each is declared and fits. (Measured 2026-11-28 on 645,262 bench
    facts, warm: the key-by-key test, ``array_except`` over the map's keys and a ``map_contains_key`` per
    column, took 10.7 s of the job's 16.7 s of expressions; this count, under 0.1 s.)"""
    readings = F.col("r")
    filled = sum((F.col(r.column).isNotNull().cast("int") for r in READING_COLUMNS), F.lit(0))
    held = F.col("device_seq").isNotNull() & F.col("device_time").isNotNull() & readings.isNotNull()
    held = held & (F.size(F.col("t")) == len(STATE_FIELDS)) & (F.size(readings) == filled)
    return F.coalesce(held, F.lit(False))


def archive_rows(raw: DataFrame) -> DataFrame:
    """Kafka source rows -> archive rows (``archive_layout.ARCHIVE_COLUMNS``); every record gives one row.

    In steps, each parse in a projection of its own, so none is evaluated twice (Spark does not merge a
    projection into the next when that would repeat an expensive expression)."""
    parsed = raw.select(
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("value"),
        F.from_json(F.col("value").cast("string"), _PARSED).alias("f"),
    )
    state = F.col("f.type") == STATE_REPORTED
    with_texts = parsed.select("*", F.when(state, F.from_json(F.col("f.payload"), _TEXTS)).alias("t"))
    with_readings = with_texts.select("*", F.from_json(F.col("t")["reported"], _TEXTS).alias("r"))
    typed = with_readings.select(
        "kafka_partition", "kafka_offset", "kafka_timestamp", "value", "f", "t", "r",
        F.col("t")["device_seq"].try_cast("bigint").alias("device_seq"),
        F.col("t")["device_time"].try_cast("timestamp").alias("device_time"),
        *(F.col("r")[r.key].try_cast(r.type).alias(r.column) for r in READING_COLUMNS),
    )  # fmt: skip
    return typed.select(
        "kafka_partition",
        "kafka_offset",
        "kafka_timestamp",
        *(_envelope_column(name) for name in ENVELOPE_NAMES),
        "device_seq",
        "device_time",
        *(r.column for r in READING_COLUMNS),
        F.when(~_held_by_columns(), F.col("f.payload")).alias("payload"),
        "value",
        F.lit(LAYOUT).alias(LAYOUT_COLUMN),
        F.to_date(F.col("kafka_timestamp")).alias(PARTITION_COLUMN),  # the session time zone is UTC
    )


def start_archive(spark: SparkSession, settings: AnalyticsSettings, *, once: bool = False) -> StreamingQuery:
    raw = stream_journal(spark, settings, settings.archive_max_offsets_per_trigger)
    writer = (
        archive_rows(raw)
        .writeStream.queryName(ARCHIVE_QUERY)
        .format("parquet")
        .option("compression", "zstd")
        .option("parquet.compression.codec.zstd.level", ZSTD_LEVEL)
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
        if once or not every:
            query.awaitTermination()
        else:
            store = open_store(settings.archive_location(), settings.s3_access())
            while not query.awaitTermination(max(1, round(every))):
                compact_step(store)
    finally:
        if query.isActive:
            query.stop()


def compact_step(store: ArchiveStore) -> None:
    """The job's periodic compaction: logged, and never the end of archiving."""
    try:
        result = compact_archive(store)
    except Exception:
        log.exception("compacting %s failed; archiving goes on", store.url)
        return
    for day in result.days:
        log.info("compacted %s: %d files into one (%d rows)", day.day, day.files, day.rows)
    if result.undone:
        log.info("compaction of %s was undone by the sink's own log compaction; again next time", store.url)
