"""The journal's whole history for batch jobs: the archive table, then the journal's tail beyond it.

``read_history`` gives the same columns as ``schema.read_journal`` (``partition``, ``offset``, ``value``;
what ``schema.parse_journal`` reads; and ``timestamp``, the record's Kafka timestamp, which the automation
backtest selects its stretch by), so the daily report and the full retrain take either unchanged and
compute the same figures: the archive holds each journal record's exact bytes (``value``) with its
partition and offset.

The tail: per journal partition, from one past the highest archived offset (the partition's earliest
offset when the archive has none of it) to the latest offset now, read from Kafka. If the journal no
longer holds an offset the archive lacks (retention ran ahead of the archive), Spark's Kafka source fails
the read (``failOnDataLoss``, its default) rather than report on a history with a hole in it.

Without an archive table (nothing committed yet, or ``archive_url`` unset) the history is the journal.
``history_sources`` gives both parts apart, for a reader that decodes the archive's typed columns
(``hearth_analytics.sources.history_facts``: the daily report) rather than each record's bytes.
``hearth archive verify`` is what says the archive holds each fact once; this module trusts it.

The home journal is not archived (it is small, and compacted by nothing): ``fold_home_journal`` reads it
whole from Kafka on the driver, for the jobs that need the homes' zones, automations or holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.archive_layout import ARCHIVE_SCHEMA
from hearth_analytics.sources.schema import read_journal
from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.adapters.topic_follower import TopicFollower
from hearth_shared.domain.home_facts import HomeFact, decode_home_fact
from hearth_shared.schema.events import MalformedRecord

log = logging.getLogger(__name__)

EARLIEST = -2  # Spark's Kafka source: the partition's earliest offset
JOURNAL_COLUMNS = ("partition", "offset", "timestamp", "value")


async def _journal_partitions(settings: AnalyticsSettings) -> list[int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.stack.kafka_bootstrap_servers)
    await consumer.start()
    try:
        return [tp.partition for tp in await topic_partitions(consumer, settings.stack.topics.journal)]
    finally:
        await consumer.stop()


def read_archive(spark: SparkSession, settings: AnalyticsSettings) -> DataFrame | None:
    """The archive table's committed rows (Spark reads them through the file sink's log), or None.

    Read with ``ARCHIVE_SCHEMA``, not a schema inferred from a file: an archive written before its typed
    columns (layout 1) and continued since holds files of both layouts, and the older rows then read
    with those columns and ``archive_layout`` null (``archive_layout``)."""
    location = settings.archive_location()
    if settings.archive_is_local() and not (Path(location) / "_spark_metadata").is_dir():
        return None
    try:
        return spark.read.schema(ARCHIVE_SCHEMA).parquet(location)
    except Exception as exc:  # no table there yet (an object store has no directory to look for)
        if "PATH_NOT_FOUND" in str(exc) or "UNABLE_TO_INFER_SCHEMA" in str(exc):
            return None
        raise


def tail_offsets(archived_ends: dict[int, int], partitions: list[int], topic: str) -> str:
    """``startingOffsets`` JSON for the tail: one past each partition's highest archived offset."""
    return json.dumps({topic: {str(p): archived_ends.get(p, EARLIEST) for p in partitions}})


@dataclass(frozen=True)
class HistorySources:
    """Where the history is: the archive table (``archive_layout.ARCHIVE_COLUMNS``, as Spark reads it;
    None without one) and the Kafka source rows of the journal beyond it (the whole journal without an
    archive)."""

    archive: DataFrame | None
    journal: DataFrame


def history_sources(spark: SparkSession, settings: AnalyticsSettings) -> HistorySources:
    """The archive, and the journal's tail from one past each partition's highest archived offset."""
    archive = read_archive(spark, settings)
    if archive is None:
        log.info("no archive at %s: reading the whole journal", settings.archive_location())
        return HistorySources(None, read_journal(spark, settings))
    ends = {
        int(row["partition"]): int(row["end"])
        for row in archive.groupBy(F.col("kafka_partition").alias("partition"))
        .agg((F.max("kafka_offset") + 1).alias("end"))
        .collect()
    }
    return HistorySources(archive, journal_tail(spark, settings, ends))


def journal_tail(spark: SparkSession, settings: AnalyticsSettings, ends: dict[int, int]) -> DataFrame:
    """The Kafka source rows of the journal from ``ends`` (one past each partition's highest archived
    offset; a partition without one from its earliest) to the latest offsets now."""
    topic = settings.stack.topics.journal
    with ThreadPoolExecutor(1) as pool:  # its own event loop, also when the caller runs one
        partitions = pool.submit(asyncio.run, _journal_partitions(settings)).result()
    log.info("history: the archive (%s), then the journal after %s", settings.archive_location(), ends)
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.stack.kafka_bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", tail_offsets(ends, partitions, topic))
        .option("endingOffsets", "latest")
        .load()
    )


def read_history(spark: SparkSession, settings: AnalyticsSettings) -> DataFrame:
    """Archive plus the journal's tail beyond it, as journal rows (``JOURNAL_COLUMNS``)."""
    sources = history_sources(spark, settings)
    journal = sources.journal.select(*JOURNAL_COLUMNS)
    if sources.archive is None:
        return journal
    archived = sources.archive.select(
        F.col("kafka_partition").alias("partition"),
        F.col("kafka_offset").alias("offset"),
        F.col("kafka_timestamp").alias("timestamp"),
        "value",
    )
    return archived.unionByName(journal)


async def _fold_home_journal(
    settings: AnalyticsSettings, apply: Callable[[HomeFact], object], name: str
) -> None:
    stack = settings.stack

    async def fold(topic: str, partition: int, offset: int, value: bytes | None) -> None:
        with contextlib.suppress(MalformedRecord):  # the services log and skip it; so does this
            apply(decode_home_fact(value))

    follower = TopicFollower(stack.kafka_bootstrap_servers, [stack.topics.home_journal], fold, name)
    await follower.start()
    try:
        await follower.caught_up.wait()
    finally:
        await follower.stop()


def fold_home_journal(settings: AnalyticsSettings, apply: Callable[[HomeFact], object], name: str) -> None:
    """Every home fact on the home journal now, in order per home, into ``apply`` (a record that is not a
    home fact is skipped); ``name``: the reader's, for its logs."""
    with ThreadPoolExecutor(1) as pool:  # its own event loop, also when the caller runs one
        pool.submit(asyncio.run, _fold_home_journal(settings, apply, name)).result()
