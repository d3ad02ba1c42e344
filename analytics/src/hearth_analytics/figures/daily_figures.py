"""The daily report's telemetry figures, as the device types declare them: the registry's
``rollup_metrics``, ``state_minutes`` and ``state_counts`` (``hearth_shared.domain.registry``), which the
streaming rollups (``hearth_analytics.rules.rollups``) read too, so a new type's metrics, minutes in a state
and state counts appear in the report (``jobs/batch.py``) and its charts (``charts.py``) with no edit here.

Per (day, home, device), over ``device.state_reported`` facts (``schema.readings``):

* ``readings``; for each rolled-up metric (``StateKey.rollup``: ambient_c, humidity_pct, battery_pct,
  brightness_pct...) ``<metric>_mean/_min/_max/_count`` over the readings that carried it.
* For each ``StateMinutes`` (heating_minutes, cooling_minutes, a light's on_minutes...): a device is in
  the state from a reading reporting the key at one of the values until its next reading reporting the
  key (any value), or, for its last such interval, until its last reading in the journal; intervals are
  split at midnight. ``<state>_cycles`` (heating_cycles, on_cycles...): such intervals that start that
  day. Ties in event time are ordered by journal version.
* For each ``StateCount`` (locks, unlocks, lock_operations, jams, door_opens...): readings reporting the
  key at one of the values.

Readings, metrics and state counts are figured from ``reading_sums`` parts, which merge in any order (a
mean is its parts' sums over their counts), and minutes from the readings that carry a minutes key and
each device's last reading: so the report computes an archive day's parts once and keeps them
(``jobs/batch.py``). The column names at the top (the charts and the summary read them), the Spark
expressions below.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from hearth_shared.domain.registry import rollup_metrics, state_counts, state_minutes

KEYS = ["day", "home_id", "device_id"]
METRICS, MINUTES, COUNTS = rollup_metrics(), state_minutes(), state_counts()


def cycles_name(minutes_name: str) -> str:
    """``heating_minutes`` -> ``heating_cycles``: the intervals of a minutes figure that start that day."""
    return minutes_name.removesuffix("_minutes") + "_cycles"


MINUTES_NAMES = tuple(m.name for m in MINUTES)
MINUTES_KEYS = tuple(dict.fromkeys(m.key for m in MINUTES))  # the state keys minutes are figured from
CYCLES_NAMES = tuple(cycles_name(m.name) for m in MINUTES)
STATE_COUNT_NAMES = tuple(c.name for c in COUNTS)
# The figures a home row sums (0 where a device had none that day).
TELEMETRY_SUMS = (
    "readings",
    *(f"{m}_count" for m in METRICS),
    *MINUTES_NAMES,
    *CYCLES_NAMES,
    *STATE_COUNT_NAMES,
)


def _count_if(condition: Column, name: str) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).alias(name)


def reading_sums(r: DataFrame, *by: str) -> DataFrame:
    """The readings' figures per (day, home, device, ``by``...) as parts that merge in any order
    (``telemetry_by_day``, ``minutes_by_day``): ``readings``, every metric's ``_sum/_min/_max/_count``, every
    state count, and ``last_seen``, the latest event time. ``by``: columns kept apart besides (the
    archive day the report's kept parts are computed per, ``jobs/batch.py``)."""
    metrics = [
        agg
        for m in METRICS
        for agg in (
            F.sum(m).alias(f"{m}_sum"),
            F.min(m).alias(f"{m}_min"),
            F.max(m).alias(f"{m}_max"),
            F.count(m).alias(f"{m}_count"),
        )
    ]
    counts = [_count_if(F.col(c.key).isin(*c.values), c.name) for c in COUNTS]
    return r.groupBy(F.to_date("event_time").alias("day"), "home_id", "device_id", *by).agg(
        F.count("*").alias("readings"), *metrics, *counts, F.max("event_time").alias("last_seen")
    )


def telemetry_by_day(sums: DataFrame) -> DataFrame:
    """Readings, every metric's mean/min/max/count and every state count, per (day, home, device), from
    ``reading_sums`` parts (any number: a mean is its sums' sum over its counts' sum)."""
    metrics = [
        agg
        for m in METRICS
        for agg in (
            F.try_divide(F.sum(f"{m}_sum"), F.sum(f"{m}_count")).alias(f"{m}_mean"),
            F.min(f"{m}_min").alias(f"{m}_min"),
            F.max(f"{m}_max").alias(f"{m}_max"),
            F.sum(f"{m}_count").alias(f"{m}_count"),
        )
    ]
    counts = [F.sum(c.name).alias(c.name) for c in COUNTS]
    return sums.groupBy(*KEYS).agg(F.sum("readings").alias("readings"), *metrics, *counts)


def minutes_by_day(r: DataFrame, sums: DataFrame) -> list[DataFrame]:
    """Every minutes figure and its cycles per (day, home, device): one frame per state key. ``r``: the
    readings that carry a key of ``MINUTES_KEYS`` (any others are left out here); ``sums``: the readings'
    ``reading_sums``, for each device's last reading."""
    last_seen = sums.groupBy("device_id").agg(F.max("last_seen").alias("last_seen"))
    return [_minutes_of_key(r, last_seen, key) for key in MINUTES_KEYS]


def _minutes_of_key(r: DataFrame, last_seen: DataFrame, key: str) -> DataFrame:
    figures = [m for m in MINUTES if m.key == key]
    counted = tuple(dict.fromkeys(v for m in figures for v in m.values))
    order = Window.partitionBy("device_id").orderBy("start", "version")
    intervals = (
        r.where(F.col(key).isNotNull())
        .select(
            "home_id", "device_id", "version", F.col(key).alias("state"), F.col("event_time").alias("start")
        )
        .withColumn("until", F.lead("start").over(order))
        .join(last_seen, "device_id")
        .withColumn("until", F.coalesce("until", "last_seen"))
        .where(F.col("state").isin(*counted) & (F.col("until") > F.col("start")))
    )
    day_start = F.col("day").cast("timestamp")
    next_day = F.date_add("day", 1).cast("timestamp")
    pieces = intervals.withColumn(
        "day",
        F.explode(
            F.sequence(F.to_date("start"), F.to_date(F.col("until") - F.expr("INTERVAL 1 MICROSECOND")))
        ),
    ).withColumn(
        "minutes",
        (F.unix_micros(F.least("until", next_day)) - F.unix_micros(F.greatest("start", day_start))) / 60e6,
    )
    starts_today = F.to_date("start") == F.col("day")
    return pieces.groupBy(*KEYS).agg(
        *(F.sum(F.when(F.col("state").isin(*m.values), F.col("minutes")).otherwise(0.0)).alias(m.name)
          for m in figures),
        *(_count_if(starts_today & F.col("state").isin(*m.values), cycles_name(m.name)) for m in figures),
    )  # fmt: skip


def join_by_keys(parts: list[DataFrame]) -> DataFrame:
    """The parts side by side: one row per (day, home, device) any of them has. Each part has at most one
    row per key and columns of its own, so their union grouped by the keys (one shuffle) is their full
    outer join (a shuffle per part, each stage waiting for the one before: a chain of 7 in a small report)."""
    union = reduce(lambda left, right: left.unionByName(right, allowMissingColumns=True), parts)
    return union.groupBy(*KEYS).agg(
        *(F.first(c, ignorenulls=True).alias(c) for c in union.columns if c not in KEYS)
    )


def home_metrics() -> list[Column]:
    """Per home and day: each metric's mean weighted by its count, and its extremes."""
    return [
        col
        for m in METRICS
        for col in (
            F.try_divide(F.sum(F.col(f"{m}_mean") * F.col(f"{m}_count")), F.sum(f"{m}_count")).alias(
                f"{m}_mean"
            ),
            F.min(f"{m}_min").alias(f"{m}_min"),
            F.max(f"{m}_max").alias(f"{m}_max"),
        )
    ]
