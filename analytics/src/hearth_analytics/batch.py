"""``hearth analytics batch``: the whole history (the archive, then the journal's tail beyond it; the
whole journal when there is no archive, see ``hearth_analytics.history``) -> a daily report.

Writes, under ``output_dir`` (default ``.hearth/analytics/reports``):

* ``daily_devices.parquet``: one row per (day, home, device) with any fact that day;
* ``daily_homes.parquet``: the same summed per (day, home);

(Parquet datasets written by Spark: a directory each, one part file; ``pandas.read_parquet`` reads them);
* ``charts/*.png``: heating/cooling, temperature, lock use, commands and anomalies per day, and
  ``overview.png`` with all four;

and prints a summary per home. Days are UTC dates of event time (the device's clock for readings and
anomalies, ``occurred_at`` for other facts).

Figures (device rows; home rows are sums, with means weighted by their counts):

* ``readings``: ``device.state_reported`` facts; ``<metric>_mean/_min/_max/_count`` over the readings that
  carried the metric (ambient_c, humidity_pct; battery_pct: min and count).
* Energy proxies: ``heating_minutes`` / ``cooling_minutes``: a device heats from a reading reporting
  ``hvac_action=heating`` until its next reading reporting ``hvac_action`` (any value), or, for its last
  such interval, until its last reading in the journal; intervals are split at midnight.
  ``heating_cycles`` / ``cooling_cycles``: intervals that start that day. Ties in event time are ordered by
  journal version.
* Lock use: ``locks`` / ``unlocks`` / ``jams``: readings reporting lock_state locked / unlocked /
  jammed; ``door_opens``: readings reporting door=open.
* ``anomalies``: ``anomaly.detected`` facts.
* Commands, on the day of their ``command.requested`` fact, by their terminal fact (the first one, by
  version): ``commands``, ``commands_converged`` / ``_failed`` / ``_rejected`` / ``_expired`` /
  ``_superseded``, ``commands_open`` (no terminal fact yet). ``command_success_rate`` = converged /
  (converged + failed + rejected + expired): a superseded command was replaced by a newer one, not
  refused, and an open one is not decided yet; null when nothing was decided.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from rich import box
from rich.console import Console
from rich.table import Table

from hearth_analytics import charts
from hearth_analytics.history import read_history
from hearth_analytics.schema import (
    ANOMALY_DETECTED,
    COMMAND_OUTCOMES,
    COMMAND_REQUESTED,
    DEVICE_REGISTERED,
    parse_journal,
    readings,
)
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.spark import build_session

log = logging.getLogger(__name__)

KEYS = ["day", "home_id", "device_id"]
OUTCOMES = ("converged", "failed", "rejected", "expired", "superseded")
DECIDED = ("converged", "failed", "rejected", "expired")
COUNT_COLUMNS = [
    "readings", "ambient_c_count", "humidity_pct_count", "battery_pct_count",
    "heating_minutes", "cooling_minutes", "heating_cycles", "cooling_cycles",
    "locks", "unlocks", "jams", "door_opens", "anomalies",
    "commands", *(f"commands_{o}" for o in OUTCOMES), "commands_open",
]  # fmt: skip


@dataclass
class BatchReport:
    homes: pd.DataFrame  # daily_homes.parquet, read back
    devices_path: Path
    homes_path: Path
    charts: list[Path]
    facts: int  # journal facts read
    device_days: int  # rows of daily_devices.parquet


def _telemetry(r: DataFrame) -> DataFrame:
    def count_if(cond: Column, name: str) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0)).alias(name)

    return r.groupBy(F.to_date("event_time").alias("day"), "home_id", "device_id").agg(
        F.count("*").alias("readings"),
        F.avg("ambient_c").alias("ambient_c_mean"),
        F.min("ambient_c").alias("ambient_c_min"),
        F.max("ambient_c").alias("ambient_c_max"),
        F.count("ambient_c").alias("ambient_c_count"),
        F.avg("humidity_pct").alias("humidity_pct_mean"),
        F.min("humidity_pct").alias("humidity_pct_min"),
        F.max("humidity_pct").alias("humidity_pct_max"),
        F.count("humidity_pct").alias("humidity_pct_count"),
        F.min("battery_pct").alias("battery_pct_min"),
        F.count("battery_pct").alias("battery_pct_count"),
        count_if(F.col("lock_state") == "locked", "locks"),
        count_if(F.col("lock_state") == "unlocked", "unlocks"),
        count_if(F.col("lock_state") == "jammed", "jams"),
        count_if(F.col("door") == "open", "door_opens"),
    )


def _hvac(r: DataFrame) -> DataFrame:
    """Heating/cooling minutes and cycles per device and day (intervals split at midnight)."""
    last_seen = r.groupBy("device_id").agg(F.max("event_time").alias("last_seen"))
    order = Window.partitionBy("device_id").orderBy("start", "version")
    intervals = (
        r.where(F.col("hvac_action").isNotNull())
        .select("home_id", "device_id", "version", "hvac_action", F.col("event_time").alias("start"))
        .withColumn("until", F.lead("start").over(order))
        .join(last_seen, "device_id")
        .withColumn("until", F.coalesce("until", "last_seen"))
        .where(F.col("hvac_action").isin("heating", "cooling") & (F.col("until") > F.col("start")))
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
    return pieces.groupBy("day", "home_id", "device_id").agg(
        F.sum(F.when(F.col("hvac_action") == "heating", F.col("minutes")).otherwise(0.0)).alias(
            "heating_minutes"
        ),
        F.sum(F.when(F.col("hvac_action") == "cooling", F.col("minutes")).otherwise(0.0)).alias(
            "cooling_minutes"
        ),
        F.sum(F.when(starts_today & (F.col("hvac_action") == "heating"), 1).otherwise(0)).alias(
            "heating_cycles"
        ),
        F.sum(F.when(starts_today & (F.col("hvac_action") == "cooling"), 1).otherwise(0)).alias(
            "cooling_cycles"
        ),
    )


def _anomalies(facts: DataFrame) -> DataFrame:
    return (
        facts.where(F.col("type") == ANOMALY_DETECTED)
        .groupBy(F.to_date("event_time").alias("day"), "home_id", "device_id")
        .agg(F.count("*").alias("anomalies"))
    )


def _commands(facts: DataFrame) -> DataFrame:
    requested = facts.where(F.col("type") == COMMAND_REQUESTED).select(
        F.to_date("occurred_at").alias("day"),
        "home_id",
        "device_id",
        F.col("payload.command_id").alias("command_id"),
    )
    outcome_of = F.create_map(*(x for t, o in COMMAND_OUTCOMES.items() for x in (F.lit(t), F.lit(o))))
    first = Window.partitionBy("command_id").orderBy("version")
    outcomes = (
        facts.where(F.col("type").isin(*COMMAND_OUTCOMES))
        .select(
            F.col("payload.command_id").alias("command_id"),
            "version",
            outcome_of[F.col("type")].alias("outcome"),
        )
        .withColumn("rank", F.row_number().over(first))
        .where(F.col("rank") == 1)
        .drop("rank", "version")
    )
    joined = requested.join(outcomes, "command_id", "left")
    return joined.groupBy("day", "home_id", "device_id").agg(
        F.count("*").alias("commands"),
        *(F.sum(F.when(F.col("outcome") == o, 1).otherwise(0)).alias(f"commands_{o}") for o in OUTCOMES),
        F.sum(F.when(F.col("outcome").isNull(), 1).otherwise(0)).alias("commands_open"),
    )


def _success_rate() -> Column:
    decided = sum((F.col(f"commands_{o}") for o in DECIDED), F.lit(0))
    return F.when(decided > 0, F.col("commands_converged") / decided)


def daily_devices(facts: DataFrame) -> DataFrame:
    """One row per (day, home, device) with any fact that day."""
    r = readings(facts)
    parts = [_telemetry(r), _hvac(r), _anomalies(facts), _commands(facts)]
    report = parts[0]
    for part in parts[1:]:
        report = report.join(part, KEYS, "full_outer")
    types = (
        facts.where(F.col("type") == DEVICE_REGISTERED)
        .groupBy("device_id")
        .agg(F.max_by("payload.device_type", "version").alias("device_type"))
    )
    report = (
        report.join(types, "device_id", "left")
        .fillna({c: 0 for c in COUNT_COLUMNS})
        .fillna({"device_type": "unknown"})
        .withColumn("command_success_rate", _success_rate())
    )
    front = ["day", "home_id", "device_id", "device_type"]
    return report.select(*front, *(c for c in report.columns if c not in front))


def daily_homes(devices: DataFrame) -> DataFrame:
    """Per (day, home): sums, means weighted by their counts, extremes, the success rate of the sums."""
    weighted = [
        F.try_divide(F.sum(F.col(f"{m}_mean") * F.col(f"{m}_count")), F.sum(f"{m}_count")).alias(f"{m}_mean")
        for m in ("ambient_c", "humidity_pct")
    ]
    extremes = [F.min("ambient_c_min").alias("ambient_c_min"), F.max("ambient_c_max").alias("ambient_c_max"),
                F.min("humidity_pct_min").alias("humidity_pct_min"),
                F.max("humidity_pct_max").alias("humidity_pct_max"),
                F.min("battery_pct_min").alias("battery_pct_min")]  # fmt: skip
    return (
        devices.groupBy("day", "home_id")
        .agg(
            F.count_distinct("device_id").alias("devices"),
            *(F.sum(c).alias(c) for c in COUNT_COLUMNS),
            *weighted,
            *extremes,
        )
        .withColumn("command_success_rate", _success_rate())
    )


def build_report(
    spark: SparkSession, settings: AnalyticsSettings, output_dir: Path | None = None
) -> BatchReport:
    """Read the journal, write both Parquet tables (with Spark) and the charts; the home table in pandas."""
    out = (output_dir or settings.output_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    facts = parse_journal(read_history(spark, settings)).cache()
    devices_path, homes_path = out / "daily_devices.parquet", out / "daily_homes.parquet"
    try:
        total = facts.count()
        devices = daily_devices(facts).cache()
        devices.orderBy(*KEYS).coalesce(1).write.mode("overwrite").parquet(str(devices_path))
        homes = daily_homes(devices).orderBy("day", "home_id").coalesce(1)
        homes.write.mode("overwrite").parquet(str(homes_path))
        device_rows = devices.count()
        devices.unpersist()
    finally:
        facts.unpersist()
    homes_pdf = pd.read_parquet(homes_path)
    drawn = charts.draw_all(homes_pdf, out / "charts")
    return BatchReport(homes_pdf, devices_path, homes_path, drawn, total, device_rows)


def print_summary(report: BatchReport, console: Console | None = None, limit: int = 25) -> None:
    console = console or Console()
    homes = report.homes
    if homes.empty:
        console.print(f"[yellow]The journal holds {report.facts} facts and no device activity to report.[/]")
        return
    first, last = homes["day"].min(), homes["day"].max()
    per_home = homes.groupby("home_id").agg(
        days=("day", "nunique"),
        devices=("devices", "max"),
        readings=("readings", "sum"),
        heating=("heating_minutes", "sum"),
        cooling=("cooling_minutes", "sum"),
        locks=("locks", "sum"),
        unlocks=("unlocks", "sum"),
        jams=("jams", "sum"),
        anomalies=("anomalies", "sum"),
        commands=("commands", "sum"),
        **{f"c_{o}": (f"commands_{o}", "sum") for o in DECIDED},
    )
    decided = sum(per_home[f"c_{o}"] for o in DECIDED)
    per_home["success"] = per_home["c_converged"] / decided.where(decided > 0)
    per_home = per_home.sort_values(["readings", "commands"], ascending=False)

    table = Table(
        title=f"Hearth daily report: {first} to {last} ({report.facts:,} facts)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("home", overflow="fold", min_width=min(12, max(4, per_home.index.str.len().max())))
    for name in ("days", "devs", "readings", "heat h", "cool h", "lk/unlk", "jams", "anom.", "cmds (ok)"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in per_home.head(limit).itertuples():
        table.add_row(
            str(r.Index), f"{r.days:d}", f"{r.devices:d}", f"{r.readings:,d}", f"{r.heating / 60:,.1f}",
            f"{r.cooling / 60:,.1f}", f"{r.locks:d}/{r.unlocks:d}", f"{r.jams:d}", f"{r.anomalies:d}",
            f"{r.commands:d}" + ("" if pd.isna(r.success) else f" ({r.success:.0%})"),
        )  # fmt: skip
    if len(per_home) > limit:
        table.caption = f"{len(per_home) - limit} more homes in the Parquet files"
    console.print(table)
    console.print(f"per device and day: {report.devices_path}")
    console.print(f"per home and day:   {report.homes_path}")
    for path in report.charts:
        console.print(f"chart: {path}")


def run_batch(
    settings: AnalyticsSettings, *, spark: SparkSession | None = None, output_dir: Path | None = None
) -> BatchReport:
    spark = spark or build_session(settings, "hearth-analytics-batch")
    report = build_report(spark, settings, output_dir)
    print_summary(report)
    return report
