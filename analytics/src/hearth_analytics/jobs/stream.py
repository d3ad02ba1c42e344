"""``hearth analytics stream``: two Structured Streaming queries over the journal (Kafka source).

* ``hearth-rollups``: telemetry (``device.state_reported``) with an event-time watermark
  (``allowed_lateness_s``), grouped by home and run through ``applyInPandasWithState``
  (``hearth_analytics.rules.rollups``: 1- and 15-minute windows per device and per home, late events counted,
  heating/cooling minutes), output mode ``update`` into the compacted rollups topic with
  ``format("kafka")``. Checkpoint: ``<checkpoint_dir>/rollups`` (offsets, state store).
* ``hearth-training``: registrations and readings in micro-batches to ``foreachBatch``
  (``hearth_analytics.jobs.train.ModelTrainer``), which merges running statistics and publishes a new
  ``AnomalyModel`` version to the models topic. Checkpoint: ``<checkpoint_dir>/training`` and
  ``<checkpoint_dir>/training-state``.

Why a stateful Python function rather than ``groupBy(window(...))``: Spark's window aggregation drops
rows behind the watermark without a trace (only a metric), and minutes in a state (heating, a light on)
need each device's previous value of the key across windows and micro-batches. With
``GroupStateTimeout.NoTimeout`` Spark hands every row, late ones included, to the function together with
the watermark, and keeps the function's state in its checkpointed state store. (Event-time timeouts would
make Spark drop late rows first; processing-time timeouts keep ``availableNow`` runs from ever
finishing.)

Delivery: Kafka source offsets and the state store are checkpointed per micro-batch; a restarted query
re-runs an unfinished micro-batch with the same offsets, state and watermark, so every figure counts
each reading once. The Kafka sink is at-least-once: a re-run micro-batch may write the same records again
(same keys, same values), which the compacted topic and its readers absorb.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from typing import Any

import msgspec
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from hearth_analytics.jobs.train import ModelTrainer
from hearth_analytics.rules.rollups import METRICS, STATE_KEYS, HomeRollups, Reading
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.schema import (
    DEVICE_REGISTERED,
    STATE_REPORTED,
    parse_journal,
    readings,
    stream_journal,
)
from hearth_analytics.spark import build_session

log = logging.getLogger(__name__)

ROLLUP_QUERY = "hearth-rollups"
TRAINING_QUERY = "hearth-training"
QUERIES = ("rollups", "training")
OUTPUT_SCHEMA = "key string, value string"
STATE_SCHEMA = "blob string"


def _readings(pdf: pd.DataFrame) -> Iterator[Reading]:
    times = pdf["event_time"].to_numpy(dtype="datetime64[us]").astype("int64")
    metric_columns = [pdf[m].to_numpy(dtype="float64", na_value=float("nan")) for m in METRICS]
    state_columns = [pdf[k].to_numpy(dtype=object) for k in STATE_KEYS]
    for i, (device_id, version) in enumerate(zip(pdf["device_id"], pdf["version"], strict=True)):
        metrics = {
            m: float(col[i]) for m, col in zip(METRICS, metric_columns, strict=True) if col[i] == col[i]
        }
        states = {
            k: col[i] for k, col in zip(STATE_KEYS, state_columns, strict=True) if isinstance(col[i], str)
        }
        yield Reading(
            device_id=device_id, version=int(version), t_us=int(times[i]), metrics=metrics, states=states
        )


def update_home(
    retention_us: int, key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    """``applyInPandasWithState`` function: one home's new readings -> its changed rollup records."""
    (home_id,) = key
    blob = msgspec.json.decode(state.get[0]) if state.exists else None
    rollups = HomeRollups(home_id, blob, retention_us=retention_us)
    watermark_us = max(state.getCurrentWatermarkMs(), 0) * 1000
    records = rollups.process([r for pdf in frames for r in _readings(pdf)], watermark_us)
    state.update((msgspec.json.encode(rollups.state).decode(),))
    if records:
        yield pd.DataFrame(records, columns=["key", "value"])


def telemetry(spark: SparkSession, settings: AnalyticsSettings) -> DataFrame:
    raw = stream_journal(spark, settings, settings.rollup_max_offsets_per_trigger)
    return readings(parse_journal(raw)).where(
        F.col("home_id").isNotNull() & F.col("device_id").isNotNull() & F.col("event_time").isNotNull()
    )


def _trigger(writer: DataStreamWriter, once: bool, interval_s: float) -> DataStreamWriter:
    return (
        writer.trigger(availableNow=True) if once else writer.trigger(processingTime=f"{interval_s} seconds")
    )


def start_rollups(spark: SparkSession, settings: AnalyticsSettings, *, once: bool = False) -> StreamingQuery:
    out = (
        telemetry(spark, settings)
        .withWatermark("event_time", f"{settings.allowed_lateness_s} seconds")
        .groupBy("home_id")
        .applyInPandasWithState(
            functools.partial(update_home, settings.retention_s * 1_000_000),
            OUTPUT_SCHEMA,
            STATE_SCHEMA,
            "update",
            GroupStateTimeout.NoTimeout,
        )
    )
    writer = (
        out.writeStream.queryName(ROLLUP_QUERY)
        .format("kafka")
        .option("kafka.bootstrap.servers", settings.stack.kafka_bootstrap_servers)
        .option("topic", settings.stack.topics.rollups)
        .option("kafka.acks", "all")
        .option("checkpointLocation", str(settings.checkpoint("rollups")))
        .outputMode("update")
    )
    return _trigger(writer, once, settings.rollup_trigger_s).start()


def start_training(
    spark: SparkSession,
    settings: AnalyticsSettings,
    *,
    once: bool = False,
    trainer: ModelTrainer | None = None,
) -> StreamingQuery:
    raw = stream_journal(spark, settings, settings.train_max_offsets_per_trigger)
    facts = parse_journal(raw).where(F.col("type").isin(STATE_REPORTED, DEVICE_REGISTERED))
    writer = (
        facts.writeStream.queryName(TRAINING_QUERY)
        .foreachBatch(trainer or ModelTrainer(settings))
        .option("checkpointLocation", str(settings.checkpoint("training")))
    )
    return _trigger(writer, once, settings.train_trigger_s).start()


def run_stream(
    settings: AnalyticsSettings,
    *,
    once: bool = False,
    spark: SparkSession | None = None,
    queries: tuple[str, ...] = QUERIES,
) -> None:
    """Run the rollup and training queries: until one fails or Ctrl-C, or (``once``) until each has
    processed what the journal held when it started (``Trigger.AvailableNow``)."""
    spark = spark or build_session(settings, "hearth-analytics-stream")
    started: list[StreamingQuery] = []
    try:
        if "rollups" in queries:
            started.append(start_rollups(spark, settings, once=once))
        if "training" in queries:
            started.append(start_training(spark, settings, once=once))
        for q in started:
            log.info("started %s (checkpoint under %s)", q.name, settings.checkpoint_dir.resolve())
        if once:
            for q in started:
                q.awaitTermination()
        else:
            spark.streams.awaitAnyTermination()
    finally:
        for q in started:
            if q.isActive:
                q.stop()
