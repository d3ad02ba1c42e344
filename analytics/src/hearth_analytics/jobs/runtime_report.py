"""``hearth analytics runtime``: the runtime report (issue 22 point 4), a Spark batch over the whole history
(the archive, then the journal's tail: ``hearth_analytics.sources.history_facts``) and the home journal,
published to the compacted rollups topic for the query API (``hearth_shared.schema.runtime_records`` has
the record, its key and what each figure means).

1. The thermostats' state reports: every ``device.state_reported`` fact of a device that ever reported
   ``hvac_action`` (all its reports, so telemetry keeps it covered between ``hvac_action`` changes).
2. The home journal, read whole on the driver (``history.fold_home_journal``): each device's holds and
   each home's zone. A home's zone is the one set with ``PUT /v1/homes/{id}`` (the schedules' zone), else
   the ``time_zone`` its thermostats reported last, else UTC; every device of a home counts its days in
   that zone, so a home's day is one day for all of them.
3. Per device (``groupBy(device_id).applyInPandas``): its reports in device-time order (ties by journal
   version) -> ``runtime_days.runtime_days`` -> one row per local day.
4. Per home and day: the sums and means of its devices' rows.
5. Both as records on the rollups topic (a day's record written again replaces the one before; a run
   rewrites every day it finds, so rerun it as often as the report should move, e.g. daily after the
   archive's hour).

The batch's time (``until``) ends the last report's stretch and the holds still open, so no day counts
minutes that have not happened yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from hearth_analytics.rules.runtime_days import HoldsAndZones, Sample, Span, runtime_days, zone_named
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.history import fold_home_journal
from hearth_analytics.sources.history_facts import read_history_facts
from hearth_analytics.sources.schema import STATE_REPORTED
from hearth_analytics.spark import build_session
from hearth_shared.schema.runtime_records import (
    FIGURES,
    MIN_HDD_FOR_RATIO,
    RECORD_FIELDS,
    RUNTIME_WINDOW,
    SCHEMA_VERSION,
)

_SAMPLE_COLUMNS = ("home_id", "device_id", "version", "event_time", "hvac_action", "outdoor_c", "target_c",
                   "panel_changes", "time_zone")  # fmt: skip
_TEXT = ("day", "time_zone", "day_start", "day_end")
_COUNTS = ("manual_changes", "holds")
_SUMS = ("covered_min", "heating_min", "cooling_min", "hold_min", "away_min")
_NULLABLE = ("hdd", "heating_min_per_hdd", "outdoor_mean_c")
DAY_COLUMNS = ("home_id", "device_id", *FIGURES)


def _spark_type(column: str) -> str:
    if column in ("home_id", "device_id", *_TEXT):
        return "string"
    return "long" if column in _COUNTS else "double"


DAY_SCHEMA = ", ".join(f"{column} {_spark_type(column)}" for column in DAY_COLUMNS)


@dataclass(frozen=True)
class RuntimeReport:
    device_days: int  # records published per (device, day)
    home_days: int  # and per (home, day)
    first_day: str | None
    last_day: str | None


def thermostat_reports(facts: DataFrame) -> DataFrame:
    """The state reports of every device that ever reported ``hvac_action`` (``_SAMPLE_COLUMNS``; a fact
    without a readable time is left out)."""
    reports = facts.where((F.col("type") == STATE_REPORTED) & F.col("event_time").isNotNull()).select(
        *_SAMPLE_COLUMNS
    )
    thermostats = reports.where(F.col("hvac_action").isNotNull()).select("device_id").distinct()
    return reports.join(thermostats, "device_id", "left_semi")


def home_zones(reports: DataFrame, set_zones: dict[str, str]) -> dict[str, str]:
    """Each home's zone: the one set on the home journal, else the one its thermostats reported last."""
    reported = (
        reports.where(F.col("time_zone").isNotNull())
        .groupBy("home_id")
        .agg(F.max_by("time_zone", F.struct("event_time", "version")).alias("time_zone"))
        .collect()
    )
    return {**{row["home_id"]: row["time_zone"] for row in reported}, **set_zones}


def _device_days(
    holds: dict[str, list[Span]], zones: dict[str, str], until: datetime
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The ``applyInPandas`` function: one device's reports -> its rows of ``DAY_SCHEMA``."""

    def run(reports: pd.DataFrame) -> pd.DataFrame:
        reports = reports.sort_values(["event_time", "version"], kind="stable")
        device_id, home_id = str(reports["device_id"].iloc[0]), str(reports["home_id"].iloc[0])
        samples = [
            Sample(
                at=_utc(r.event_time),
                hvac_action=None if pd.isna(r.hvac_action) else str(r.hvac_action),
                outdoor_c=None if pd.isna(r.outdoor_c) else float(r.outdoor_c),
                target_c=None if pd.isna(r.target_c) else float(r.target_c),
                panel_changes=None if pd.isna(r.panel_changes) else int(r.panel_changes),
            )
            for r in reports.itertuples(index=False)
        ]
        days = runtime_days(samples, zone_named(zones.get(home_id)), holds.get(device_id, ()), until)
        rows = [(home_id, device_id, *(getattr(day, name) for name in FIGURES)) for day in days]
        return pd.DataFrame(rows, columns=list(DAY_COLUMNS))

    return run


def _utc(value: object) -> datetime:
    """A timestamp from Spark's pandas rows (naive UTC: the session's zone is UTC) as an aware datetime."""
    at = pd.Timestamp(value)
    moment: datetime = (at.tz_localize("UTC") if at.tzinfo is None else at.tz_convert("UTC")).to_pydatetime()
    return moment


def device_days(
    reports: DataFrame, holds: dict[str, list[Span]], zones: dict[str, str], until: datetime
) -> DataFrame:
    """One row per (device, local day) of ``DAY_SCHEMA`` (a missing figure is null, never NaN)."""
    days = reports.groupBy("device_id").applyInPandas(_device_days(holds, zones, until), DAY_SCHEMA)
    return days.select(
        *(F.nanvl(F.col(c), F.lit(None).cast("double")).alias(c) if c in _NULLABLE else F.col(c)
          for c in days.columns)
    )  # fmt: skip


def home_days(devices: DataFrame) -> DataFrame:
    """Per (home, local day): the devices' minutes and counts summed, their ``hdd`` and outdoor averaged."""
    homes = devices.groupBy("home_id", "day").agg(
        F.first("time_zone").alias("time_zone"),
        F.first("day_start").alias("day_start"),
        F.first("day_end").alias("day_end"),
        F.count("*").alias("devices"),
        *(F.round(F.sum(c), 3).alias(c) for c in _SUMS),
        *(F.sum(c).alias(c) for c in _COUNTS),
        F.round(F.avg("hdd"), 4).alias("hdd"),
        F.round(F.avg("outdoor_mean_c"), 3).alias("outdoor_mean_c"),
    )
    per_hdd = F.when(F.col("hdd") >= MIN_HDD_FOR_RATIO, F.round(F.col("heating_min") / F.col("hdd"), 3))
    return homes.withColumn("heating_min_per_hdd", per_hdd)


def rollup_records(devices: DataFrame, homes: DataFrame) -> DataFrame:
    """Both as rollups-topic records: ``key``, ``value`` (the ``RuntimeDayRecord`` JSON, nulls kept)."""
    common = {"schema_version": F.lit(SCHEMA_VERSION), "window": F.lit(RUNTIME_WINDOW)}
    device_rows = devices.withColumns({**common, "scope": F.lit("device"), "devices": F.lit(1)})
    home_rows = homes.withColumns({**common, "scope": F.lit("home"), "device_id": F.lit(None).cast("string")})
    subject = F.coalesce(F.col("device_id"), F.col("home_id"))
    value = F.to_json(F.struct(*(F.col(name) for name in RECORD_FIELDS)), {"ignoreNullFields": "false"})
    return (
        device_rows.select(*RECORD_FIELDS)
        .unionByName(home_rows.select(*RECORD_FIELDS))
        .select(F.concat_ws(":", "scope", subject, "window", "day").alias("key"), value.alias("value"))
    )


def build_runtime_report(
    spark: SparkSession, settings: AnalyticsSettings, until: datetime | None = None
) -> RuntimeReport:
    """Read the history and the home journal, publish every (device, day) and (home, day) record."""
    until = until or datetime.now(UTC)
    spans = HoldsAndZones()
    fold_home_journal(settings, spans.apply, "runtime-report")
    reports = thermostat_reports(read_history_facts(spark, settings)).cache()
    try:
        zones = home_zones(reports, spans.zones)
        devices = device_days(reports, spans.holds(), zones, until).cache()
        homes = home_days(devices).cache()
        (
            rollup_records(devices, homes)
            .write.format("kafka")
            .option("kafka.bootstrap.servers", settings.stack.kafka_bootstrap_servers)
            .option("topic", settings.stack.topics.rollups)
            .option("kafka.acks", "all")
            .save()
        )
        span = devices.agg(F.min("day").alias("first"), F.max("day").alias("last")).first()
        report = RuntimeReport(
            devices.count(), homes.count(), span["first"] if span else None, span["last"] if span else None
        )
        devices.unpersist()
        homes.unpersist()
    finally:
        reports.unpersist()
    return report


def run_runtime(settings: AnalyticsSettings, *, spark: SparkSession | None = None) -> RuntimeReport:
    spark = spark or build_session(settings, "hearth-analytics-runtime")
    report = build_runtime_report(spark, settings)
    print(
        f"runtime report: {report.device_days} device-days and {report.home_days} home-days "
        f"({report.first_day} to {report.last_day}) on {settings.stack.topics.rollups}"
    )
    return report
