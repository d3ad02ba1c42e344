"""``hearth analytics batch``: the whole history (the archive, then the journal's tail beyond it; the
whole journal when there is no archive, see ``hearth_analytics.sources.history``) -> a daily report.

Writes, under ``output_dir`` (default ``.hearth/analytics/reports``):

* ``daily_devices.parquet``: one row per (day, home, device) with any fact that day;
* ``daily_homes.parquet``: the same summed per (day, home);

(Parquet datasets written by Spark: a directory each, one part file; ``pandas.read_parquet`` reads them);
* ``charts/*.png``: time in a state (heating, cooling, lights on...), temperature, lock use, commands and
  anomalies per day, the homes with the most, and ``overview.png`` with all six;

and prints a summary per home. The facts come flat and slim from
``hearth_analytics.sources.history_facts`` (the archive's typed columns with only the payloads a figure
needs parsed, then the journal's tail). Days are UTC dates of event time (the device's clock for
readings and anomalies, ``occurred_at`` for other facts).

Every figure comes from parts of the facts that merge in any order (``report_parts``): ``sums``, the
state reports' sums, counts and extremes per (day, home, device) (``daily_figures.reading_sums``);
``kept``, the facts a figure reads whole (``KEPT_TYPES``: registrations, anomalies, command requests and
outcomes; commands pair with their outcomes, minutes need the readings in order: neither merges as a
sum) and the state reports that carry a minutes key; and ``others``, how many facts neither holds (the
report says how many facts it read). So the report computes the parts of each archive day once and
keeps them beside the archive (``hearth_analytics.sources.archive_day_parts``): a later report reads the
kept days back (a few rows a device and day, and the kept facts: 2 % of the bench's) and computes
only the days that changed, the day still being written among them, and the journal's tail.
``PARTS_VERSION`` is part of the kept parts' key: a change to these rules bumps it, and parts of the old
rules are never read.

Figures (device rows; home rows are sums, with means weighted by their counts):

* Telemetry, as the device types declare it (``hearth_analytics.figures.daily_figures``): ``readings``, every
  rolled-up metric's ``_mean/_min/_max/_count``, every minutes-in-a-state figure with its ``_cycles``
  (``heating_minutes``, ``cooling_minutes``, a light's ``on_minutes``...) and every state count
  (``locks``, ``unlocks``, ``jams``, ``door_opens``...).
* ``anomalies``: ``anomaly.detected`` facts.
* Commands, on the day of their ``command.requested`` fact, by their terminal fact (the first one, by
  version): ``commands``, ``commands_converged`` / ``_failed`` / ``_rejected`` / ``_expired`` /
  ``_superseded``, ``commands_open`` (no terminal fact yet). ``command_success_rate`` = converged /
  (converged + failed + rejected + expired): a superseded command was replaced by a newer one, not
  refused, and an open one is not decided yet; null when nothing was decided.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import cast

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from rich import box
from rich.console import Console
from rich.table import Table

from hearth_analytics.figures import charts
from hearth_analytics.figures.daily_figures import (
    KEYS as KEYS,  # the report's row keys, also for its readers (test_archive_history)
)
from hearth_analytics.figures.daily_figures import (
    MINUTES_KEYS,
    MINUTES_NAMES,
    TELEMETRY_SUMS,
    home_metrics,
    join_by_keys,
    minutes_by_day,
    reading_sums,
    telemetry_by_day,
)
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.archive_day_parts import ARCHIVE_DAY, archive_day_parts
from hearth_analytics.sources.history import journal_tail
from hearth_analytics.sources.history_facts import TEXT_KEYS, archive_facts, journal_facts
from hearth_analytics.sources.schema import (
    ANOMALY_DETECTED,
    COMMAND_OUTCOMES,
    COMMAND_REQUESTED,
    DEVICE_REGISTERED,
    METRICS,
    STATE_REPORTED,
    read_journal,
)
from hearth_analytics.spark import build_session

log = logging.getLogger(__name__)

OUTCOMES = ("converged", "failed", "rejected", "expired", "superseded")
DECIDED = ("converged", "failed", "rejected", "expired")
COUNT_COLUMNS = [
    *TELEMETRY_SUMS, "anomalies", "commands", *(f"commands_{o}" for o in OUTCOMES), "commands_open",
]  # fmt: skip
PARTS = "daily-report"  # the kept parts' name beside the archive
PARTS_VERSION = 2  # bump when a rule of ``report_parts`` changes (module docstring)
# The facts a figure reads whole (besides the state reports that carry a minutes key).
KEPT_TYPES = (ANOMALY_DETECTED, DEVICE_REGISTERED, COMMAND_REQUESTED, *COMMAND_OUTCOMES)


@dataclass
class BatchReport:
    homes: pd.DataFrame  # the rows of daily_homes.parquet, in its order
    devices_path: Path
    homes_path: Path
    charts: list[Path]
    facts: int  # journal facts read
    device_days: int  # rows of daily_devices.parquet
    archive_days: int = 0  # archive days the facts came from (0: the journal alone)
    archive_days_computed: int = 0  # of them, the days whose parts were computed (the rest read back)


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
        "command_id",
    )
    outcome_of = F.create_map(*(x for t, o in COMMAND_OUTCOMES.items() for x in (F.lit(t), F.lit(o))))
    outcomes = (  # the first terminal fact by version: a hash aggregate, no sort
        facts.where(F.col("type").isin(*COMMAND_OUTCOMES))
        .groupBy("command_id")
        .agg(F.min_by(outcome_of[F.col("type")], "version").alias("outcome"))
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


def _readings(facts: DataFrame, *by: str) -> DataFrame:
    """``device.state_reported`` facts: what the device said (only the keys that changed)."""
    return facts.where(F.col("type") == STATE_REPORTED).select(
        "home_id", "device_id", "version", "event_time", *METRICS, *TEXT_KEYS, *by
    )


def report_parts(facts: DataFrame, *by: str) -> dict[str, DataFrame]:
    """Facts (``history_facts.FACT_COLUMNS``) -> the report's parts (module docstring): ``sums`` of the
    state reports, the ``kept`` facts, and ``others``, how many facts neither holds; ``by``: columns kept
    apart besides (the archive day)."""
    state = F.col("type") == STATE_REPORTED
    kept_type = F.col("type").isin(*KEPT_TYPES)
    carries_minutes = reduce(lambda a, b: a | b, (F.col(k).isNotNull() for k in MINUTES_KEYS), F.lit(False))
    return {
        "sums": reading_sums(_readings(facts, *by), *by),
        "kept": facts.where(kept_type | (state & carries_minutes)),
        "others": facts.where(~state & ~kept_type).groupBy(*by).agg(F.count("*").alias("facts")),
    }


def _facts_read(sums: DataFrame, kept: DataFrame, others: DataFrame) -> int:
    """How many facts the parts were made of, in one job."""
    counted = (
        sums.select(F.col("readings").alias("n"))
        .unionByName(kept.where(F.col("type") != STATE_REPORTED).select(F.lit(1).cast("long").alias("n")))
        .unionByName(others.select(F.col("facts").alias("n")))
    )
    return int(counted.agg(F.sum("n")).collect()[0][0] or 0)


def daily_devices(sums: DataFrame, kept: DataFrame) -> DataFrame:
    """One row per (day, home, device) with any fact that day, from the report's parts (merged)."""
    report = join_by_keys(
        [telemetry_by_day(sums), *minutes_by_day(_readings(kept), sums), _anomalies(kept), _commands(kept)]
    )
    types = (
        kept.where(F.col("type") == DEVICE_REGISTERED)
        .groupBy("device_id")
        .agg(F.max_by("device_type", "version").alias("device_type"))
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
    """Per (day, home): sums, means weighted by their counts, extremes, the success rate of the sums;
    ``devices``: the home's device rows that day (one a device: a count, no distinct count's shuffle)."""
    return (
        devices.groupBy("day", "home_id")
        .agg(
            F.count("*").alias("devices"),
            *(F.sum(c).alias(c) for c in COUNT_COLUMNS),
            *home_metrics(),
        )
        .withColumn("command_success_rate", _success_rate())
    )


def write_sorted(frame: DataFrame, keys: list[str], path: Path) -> None:
    """``frame`` as one Parquet file sorted by ``keys``: its partitions joined in one task and sorted there
    (an ``orderBy`` would first sample the rows for a range partitioning, a job of its own, to sort in
    parallel what one task then writes anyway)."""
    frame.coalesce(1).sortWithinPartitions(*keys).write.mode("overwrite").parquet(str(path))


def _write_both(homes: DataFrame, homes_path: Path, devices: DataFrame, devices_path: Path) -> None:
    write_sorted(homes, ["day", "home_id"], homes_path)
    write_sorted(devices, KEYS, devices_path)


def build_report(
    spark: SparkSession, settings: AnalyticsSettings, output_dir: Path | None = None
) -> BatchReport:
    """Read the journal, write both Parquet tables (with Spark) and the charts; the home table in pandas."""
    out = (output_dir or settings.output_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    days = archive_day_parts(
        spark, settings, PARTS, PARTS_VERSION,
        lambda rows: report_parts(archive_facts(rows, keep=(ARCHIVE_DAY,)), ARCHIVE_DAY),
    )  # fmt: skip
    journal = read_journal(spark, settings) if days is None else journal_tail(spark, settings, days.ends)
    # As many partitions as cores, here and in the merged parts: a task per Kafka partition and per kept
    # file in each stage after them was most of a later report's time (its parts and tail are small).
    cores = spark.sparkContext.defaultParallelism
    tail = journal_facts(journal).coalesce(cores).cache()  # read from Kafka once for both parts
    tail_parts = report_parts(tail)
    merged = {n: p if days is None else days.frames[n].unionByName(p) for n, p in tail_parts.items()}
    sums, kept = merged["sums"].coalesce(cores).cache(), merged["kept"].coalesce(cores).cache()
    cached = [tail, sums, kept]  # unpersisted at the end, however it ends
    devices_path, homes_path = out / "daily_devices.parquet", out / "daily_homes.parquet"
    # Python's work beside Spark's, each in a thread of its own (a Spark call waits without the GIL): the
    # figures' plan is built while the parts are read and counted, the charts drawn while both tables are
    # sorted and written. Each was about a second of a later report, Spark's jobs as long.
    try:
        with ThreadPoolExecutor(1) as spark_side:
            counted = spark_side.submit(_facts_read, sums, kept, merged["others"])  # the caches filled
            devices = daily_devices(sums, kept).cache()
            cached.append(devices)
            total = counted.result()
        tail.unpersist()
        homes = daily_homes(devices).cache()
        cached.append(homes)
        # The home rows (computing them fills the device rows' cache), in the file's order and written from
        # the same cache: the charts need nothing else, so they are drawn while Spark writes both tables.
        homes_pdf = cast(pd.DataFrame, homes.toPandas()).sort_values(["day", "home_id"], ignore_index=True)
        with ThreadPoolExecutor(1) as spark_side:
            written = spark_side.submit(_write_both, homes, homes_path, devices, devices_path)
            drawn = charts.draw_all(homes_pdf, out / "charts")
            written.result()
    finally:
        for frame in cached:
            frame.unpersist()
    device_rows = int(homes_pdf["devices"].sum())  # the device rows, each in one home row's count
    archive_days = (0, 0) if days is None else (days.days, len(days.computed))
    return BatchReport(homes_pdf, devices_path, homes_path, drawn, total, device_rows, *archive_days)


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
        **{m: (m, "sum") for m in MINUTES_NAMES},
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
    hours = [f"{m.removesuffix('_minutes')} h" for m in MINUTES_NAMES]  # heating h, on h...
    for name in ("days", "devs", "readings", *hours, "lk/unlk", "jams", "anom.", "cmds (ok)"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in per_home.head(limit).itertuples():
        table.add_row(
            str(r.Index), f"{r.days:d}", f"{r.devices:d}", f"{r.readings:,d}",
            *(f"{getattr(r, m) / 60:,.1f}" for m in MINUTES_NAMES),
            f"{r.locks:d}/{r.unlocks:d}", f"{r.jams:d}", f"{r.anomalies:d}",
            f"{r.commands:d}" + ("" if pd.isna(r.success) else f" ({r.success:.0%})"),
        )  # fmt: skip
    if len(per_home) > limit:
        table.caption = f"{len(per_home) - limit} more homes in the Parquet files"
    console.print(table)
    if report.archive_days:
        console.print(f"archive days: {report.archive_days:,} ({report.archive_days_computed:,} computed, "
                      "the others' parts read back), then the journal's tail")  # fmt: skip
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
