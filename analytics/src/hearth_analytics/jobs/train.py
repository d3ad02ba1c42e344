"""Training the telemetry anomaly model and publishing it to the compacted models topic.

The model is the one ``hearth_shared.domain.anomaly`` scores with: for each scored metric
(``SCORED_METRICS``: ambient_c, humidity_pct) a ``Baseline(n, mean, std)`` per device and per device type,
by hour of day (UTC, of the device's clock) and for all hours (``"*"``). Spark computes sufficient
statistics ``(n, mean, M2)`` per device, metric and hour in one pass; they merge exactly (Chan et al.)
across micro-batches, restarts and device types, so the streaming trainer and a full retrain from the
journal give the same baselines for the same readings.

Choices:

* **Device type** comes from the ``device.registered`` fact (``payload.device_type``), the authority on
  what a device is, so a new type needs no change here. A device whose registration the job has not
  seen contributes to ``by_device`` only.
* ``std`` is the population standard deviation (``sqrt(M2 / n)``).
* Only slices with ``n >= min_count`` are published: the scorer ignores smaller ones anyway
  (``_baseline``), and it keeps the record small. The record is compressed (zstd) on the wire; the
  broker's ``max.message.bytes`` (1 MB by default) bounds it at roughly a few thousand devices.
* **Record**: key = the model name (``telemetry-anomaly``), value =
  ``hearth_shared.schema.events.encode(model)``
  (``AnomalyModel`` JSON; ``decode_model`` reads it). ``version`` = 1 + the newest version of that model
  on the topic (or in the trainer's own state, whichever is higher), so every publication has a new,
  increasing version; the newest record of the key is the model in force.

Streaming (``ModelTrainer``, a ``foreachBatch`` function): the running statistics live in
``<checkpoint_dir>/training-state/state-<batch id>/`` on the driver, written atomically after the model is
published. A micro-batch whose id is not newer than the state's is skipped: Spark replays the last
unfinished micro-batch after a restart with the same id and the same offsets, so nothing is counted
twice, and nothing is lost (the offsets are committed only after the function returns).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.history import read_history
from hearth_analytics.sources.schema import DEVICE_REGISTERED, STATE_REPORTED, parse_journal, read_topic
from hearth_shared.domain.anomaly import SCORED_METRICS
from hearth_shared.schema.events import AnomalyModel, Baseline, encode

log = logging.getLogger(__name__)

MODEL_NAME = "telemetry-anomaly"
ALL_HOURS = "*"
STAT_COLUMNS = ["device_id", "metric", "hour", "n", "mean", "m2"]


# ----------------------------------------------------------------------------------- Spark: statistics


def reading_stats(facts: DataFrame) -> DataFrame:
    """``(device_id, metric, hour, n, mean, m2)`` of the scored metrics in the facts' readings."""
    values = F.explode(
        F.array(
            *(
                F.struct(F.lit(m).alias("metric"), F.col(f"payload.reported.{m}").alias("value"))
                for m in SCORED_METRICS
            )
        )
    )
    return (
        facts.where(F.col("type") == STATE_REPORTED)
        .select("device_id", F.hour("event_time").alias("hour"), values.alias("v"))
        .where(F.col("v.value").isNotNull())
        .groupBy("device_id", F.col("v.metric").alias("metric"), "hour")
        .agg(
            F.count("*").alias("n"),
            F.avg("v.value").alias("mean"),
            (F.var_pop("v.value") * F.count("*")).alias("m2"),
        )
    )


def scored_readings(facts: DataFrame) -> DataFrame:
    """Readings carrying at least one scored metric (what ``trained_on`` counts)."""
    present = [F.col(f"payload.reported.{m}").isNotNull() for m in SCORED_METRICS]
    any_present = present[0]
    for p in present[1:]:
        any_present = any_present | p
    return facts.where((F.col("type") == STATE_REPORTED) & any_present)


def registered_types(facts: DataFrame) -> DataFrame:
    """``(device_id, device_type)`` from each device's ``device.registered`` fact."""
    return facts.where(F.col("type") == DEVICE_REGISTERED).select(
        "device_id", F.col("payload.device_type").alias("device_type")
    )


def collect_stats(stats: DataFrame) -> pd.DataFrame:
    pdf: pd.DataFrame = stats.toPandas()
    if pdf.empty:
        return empty_stats()
    pdf["hour"] = pdf["hour"].astype("int64")
    pdf["n"] = pdf["n"].astype("int64")
    return pdf[STAT_COLUMNS]


def empty_stats() -> pd.DataFrame:
    return pd.DataFrame(
        {"device_id": pd.Series(dtype="object"), "metric": pd.Series(dtype="object"),
         "hour": pd.Series(dtype="int64"), "n": pd.Series(dtype="int64"),
         "mean": pd.Series(dtype="float64"), "m2": pd.Series(dtype="float64")}
    )  # fmt: skip


# ------------------------------------------------------------------------------ pandas: merge and model


def merge_stats(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Running statistics of two disjoint sets of readings, per (device, metric, hour)."""
    if a.empty:
        return b.copy()
    if b.empty:
        return a.copy()
    keys = ["device_id", "metric", "hour"]
    both = a.merge(b, on=keys, how="outer", suffixes=("_a", "_b"))
    for col in ("n_a", "n_b", "mean_a", "mean_b", "m2_a", "m2_b"):
        both[col] = both[col].fillna(0)
    n = both["n_a"] + both["n_b"]
    delta = both["mean_b"] - both["mean_a"]
    both["n"] = n.astype("int64")
    both["mean"] = np.where(n > 0, both["mean_a"] + delta * both["n_b"] / n, 0.0)
    both["m2"] = (
        both["m2_a"] + both["m2_b"] + np.where(n > 0, delta * delta * both["n_a"] * both["n_b"] / n, 0.0)
    )
    return both[STAT_COLUMNS].reset_index(drop=True)


def pool(stats: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Pooled ``(n, mean, m2)`` over groups of slices (exact, like computing over all their readings)."""
    s = stats.assign(total=stats["n"] * stats["mean"])
    grouped = s.groupby(by, sort=True)
    out = grouped.agg(n=("n", "sum"), total=("total", "sum")).reset_index()
    out["mean"] = out["total"] / out["n"]
    s = s.merge(out[[*by, "mean"]].rename(columns={"mean": "pooled"}), on=by)
    s["m2_part"] = s["m2"] + s["n"] * (s["mean"] - s["pooled"]) ** 2
    out = out.merge(s.groupby(by, sort=True)["m2_part"].sum().rename("m2").reset_index(), on=by)
    return out[[*by, "n", "mean", "m2"]]


def _baselines(stats: pd.DataFrame, owner: str, min_count: int) -> dict[str, dict[str, dict[str, Baseline]]]:
    """``{owner: {metric: {hour or "*": Baseline}}}`` from per-hour slices with an ``owner`` column."""
    by_hour = stats.assign(slice=stats["hour"].astype(str))
    overall = pool(stats, [owner, "metric"]).assign(slice=ALL_HOURS)
    found: dict[str, dict[str, dict[str, Baseline]]] = {}
    for row in pd.concat([by_hour, overall], ignore_index=True).itertuples(index=False):
        n = int(row.n)
        if n < min_count:
            continue
        std = float(np.sqrt(max(row.m2, 0.0) / n))
        found.setdefault(getattr(row, owner), {}).setdefault(row.metric, {})[row.slice] = Baseline(
            n, round(float(row.mean), 6), round(std, 6)
        )
    return found


def build_model(
    stats: pd.DataFrame,
    types: dict[str, str],
    *,
    version: int,
    trained_on: int,
    threshold: float,
    min_count: int,
    trained_at: datetime | None = None,
) -> AnomalyModel:
    by_device = _baselines(stats, "device_id", min_count) if not stats.empty else {}
    typed = stats.assign(device_type=stats["device_id"].map(types)).dropna(subset=["device_type"])
    by_type = (
        _baselines(pool(typed, ["device_type", "metric", "hour"]), "device_type", min_count)
        if not typed.empty
        else {}
    )
    return AnomalyModel(
        name=MODEL_NAME,
        version=version,
        trained_at=trained_at or datetime.now(UTC),
        trained_on=trained_on,
        threshold=threshold,
        min_count=min_count,
        by_type=by_type,
        by_device=by_device,
    )


# ---------------------------------------------------------------------------------- the models topic


def latest_model_version(spark: SparkSession, settings: AnalyticsSettings, name: str = MODEL_NAME) -> int:
    """The newest version of model ``name`` on the models topic (0 if there is none)."""
    raw = read_topic(spark, settings, settings.stack.topics.models)
    row = (
        raw.where(F.col("key").cast("string") == name)
        .select(F.get_json_object(F.col("value").cast("string"), "$.version").cast("long").alias("v"))
        .agg(F.max("v").alias("v"))
        .first()
    )
    return int(row["v"]) if row is not None and row["v"] is not None else 0


def publish_model(spark: SparkSession, settings: AnalyticsSettings, model: AnomalyModel) -> int:
    """Write the model record (key = name) to the models topic; returns its size in bytes."""
    value = encode(model).decode()
    frame = spark.createDataFrame([(model.name, value)], "key string, value string")
    (
        frame.write.format("kafka")
        .option("kafka.bootstrap.servers", settings.stack.kafka_bootstrap_servers)
        .option("topic", settings.stack.topics.models)
        .option("kafka.compression.type", "zstd")
        .option("kafka.max.request.size", str(64 * 1024 * 1024))
        .option("kafka.acks", "all")
        .save()
    )
    return len(value)


# ------------------------------------------------------------------------------------- full retrain


def train_from_history(spark: SparkSession, settings: AnalyticsSettings) -> AnomalyModel:
    """``hearth analytics train``: baselines from every reading in the history (archive, then the journal's
    tail; ``hearth_analytics.sources.history``), published as a new version."""
    facts = parse_journal(read_history(spark, settings)).cache()
    try:
        stats = collect_stats(reading_stats(facts))
        types = {r["device_id"]: r["device_type"] for r in registered_types(facts).collect()}
        trained_on = scored_readings(facts).count()
    finally:
        facts.unpersist()
    model = build_model(
        stats,
        types,
        version=latest_model_version(spark, settings) + 1,
        trained_on=trained_on,
        threshold=settings.model_threshold,
        min_count=settings.model_min_count,
    )
    size = publish_model(spark, settings, model)
    log.info("published %s v%d (%d readings, %d bytes)", model.name, model.version, trained_on, size)
    return model


# --------------------------------------------------------------------------------- streaming trainer


@dataclass
class TrainerState:
    batch_id: int = -1
    version: int = 0
    trained_on: int = 0
    types: dict[str, str] = field(default_factory=dict)
    stats: pd.DataFrame = field(default_factory=empty_stats)


class ModelTrainer:
    """``foreachBatch`` function of the training query: merge, publish, then remember the batch id."""

    def __init__(self, settings: AnalyticsSettings, keep: int = 2) -> None:
        self.settings = settings
        self.dir = settings.checkpoint("training-state")
        self.keep = keep
        self.published: list[AnomalyModel] = []  # this process's publications (for callers and tests)

    def load(self) -> TrainerState:
        done = sorted(self.dir.glob("state-*")) if self.dir.exists() else []
        if not done:
            return TrainerState()
        latest = done[-1]
        meta = json.loads((latest / "meta.json").read_text())
        stats = pd.read_parquet(latest / "stats.parquet")
        return TrainerState(meta["batch_id"], meta["version"], meta["trained_on"], meta["types"], stats)

    def save(self, state: TrainerState) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix="partial-", dir=self.dir))
        state.stats.to_parquet(partial / "stats.parquet", index=False)
        meta = {"batch_id": state.batch_id, "version": state.version, "trained_on": state.trained_on,
                "types": state.types}  # fmt: skip
        (partial / "meta.json").write_text(json.dumps(meta))
        partial.rename(self.dir / f"state-{state.batch_id:012d}")  # atomic: a state is whole or absent
        for old in sorted(self.dir.glob("state-*"))[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        for stale in self.dir.glob("partial-*"):
            shutil.rmtree(stale, ignore_errors=True)

    def __call__(self, facts: DataFrame, batch_id: int) -> None:
        state = self.load()
        if batch_id <= state.batch_id:
            log.info(
                "training: micro-batch %d already applied (state at %d), skipped", batch_id, state.batch_id
            )
            return
        spark = facts.sparkSession
        facts = facts.cache()
        try:
            new_stats = collect_stats(reading_stats(facts))
            new_types = {r["device_id"]: r["device_type"] for r in registered_types(facts).collect()}
            new_readings = scored_readings(facts).count() if not new_stats.empty else 0
        finally:
            facts.unpersist()
        if new_stats.empty and not new_types:
            return  # nothing to learn: replaying this batch later is harmless
        state.batch_id = batch_id
        state.types.update(new_types)
        state.stats = merge_stats(state.stats, new_stats)
        state.trained_on += new_readings
        state.version = max(state.version, latest_model_version(spark, self.settings)) + 1
        model = build_model(
            state.stats,
            state.types,
            version=state.version,
            trained_on=state.trained_on,
            threshold=self.settings.model_threshold,
            min_count=self.settings.model_min_count,
        )
        size = publish_model(spark, self.settings, model)
        self.save(state)
        self.published.append(model)
        log.info("training: batch %d -> %s v%d (%d readings, %d bytes)", batch_id, model.name,
                 model.version, state.trained_on, size)  # fmt: skip


def run_train(settings: AnalyticsSettings, *, spark: SparkSession | None = None) -> AnomalyModel:
    """``hearth analytics train``: a session (unless given), a full retrain, the published model."""
    from hearth_analytics.spark import build_session

    return train_from_history(spark or build_session(settings, "hearth-analytics-train"), settings)
