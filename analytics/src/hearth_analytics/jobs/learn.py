"""``hearth analytics learn``: suggested programs and each room's response, learned from the whole history
(the archive plus the journal's tail, ``hearth_analytics.sources.history``) and published to the home journal.

Spark reads and groups; the learning itself is the domain's pure functions, run per device in
``applyInPandas``:

* **Manual changes**: a thermostat's ``device.state_reported`` facts that carry ``panel_changes`` (the
  count of targets set by hand), in the device's journal order; a change is a report whose count went up
  from the one before it (a device's first report only states its count), at its device time, with the
  ``target_c`` it set (carried from the reports before when the report has none: a report holds only the
  keys that changed, and a hand may set the target already in force). The device's zone is the latest
  ``time_zone`` it reported. Per device: ``hearth_shared.domain.program_learning.suggest_program`` -> a
  ``schedule.suggested`` fact.
* **Room response**: every thermostat report with ``ambient_c``, ``outdoor_c`` or ``hvac_action``; per
  device: ``room_response.response_samples`` and ``fit_room`` -> a ``room.response_fitted`` fact.

Only thermostats (by their ``device.registered`` fact) are learned from: the program's command is the
thermostat's ``set_target_temperature``.

**Ids and re-runs.** A suggestion's id is derived from its device and program, a response's from its
device and parameters; the job reads the ids already on the home journal and publishes only new ones. So
a re-run on the same evidence publishes nothing, a program the household rejected (or accepted) is never
suggested again, and a device whose history grew gets a new suggestion only when what it learns changed.
The facts go to the home journal keyed by home (as every home fact), read by the query API (the device's
suggestions), the automations service (preheat) and nothing else; the learner reads only journal facts.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.history import read_history
from hearth_analytics.sources.schema import DEVICE_REGISTERED, STATE_REPORTED, finite_struct, read_topic
from hearth_shared.domain.home_facts import (
    HomeFact,
    RoomResponseFitted,
    ScheduleSuggested,
    SuggestionPayload,
    decode_home_fact,
    encode_home_fact,
)
from hearth_shared.domain.program_learning import ManualChange, suggest_program
from hearth_shared.domain.room_response import Reading, fit_room, response_samples
from hearth_shared.schema.ids import IDENTIFIER_PATTERN

log = logging.getLogger(__name__)

LEARN_NAMESPACE = uuid.UUID("5c1e8f0a-7b2d-4e6a-9f31-0d8c4b2a6e17")
DEVICE_TYPE = "thermostat"
PUBLISHED_TYPES = ("schedule.suggested", "room.response_fitted")

_REPORTED = StructType(
    [
        StructField("target_c", DoubleType()),
        StructField("panel_changes", LongType()),
        StructField("hvac_action", StringType()),
        StructField("ambient_c", DoubleType()),
        StructField("outdoor_c", DoubleType()),
        StructField("time_zone", StringType()),
    ]
)
_PAYLOAD = StructType(
    [
        StructField("device_type", StringType()),
        StructField("device_time", StringType()),
        StructField("reported", _REPORTED),
    ]
)
_FACT = StructType(
    [
        StructField("type", StringType()),
        StructField("device_id", StringType()),
        StructField("home_id", StringType()),
        StructField("version", LongType()),
        StructField("occurred_at", StringType()),
        StructField("payload", _PAYLOAD),
    ]
)
OUTPUT_SCHEMA = "fact_id string, home_id string, fact string"


def suggestion_id(device_id: str, payload: SuggestionPayload) -> uuid.UUID:
    """Derived from the device and its program (not the evidence): the same program is one suggestion."""
    return uuid.uuid5(
        LEARN_NAMESPACE, f"suggested\n{device_id}\n{msgspec.json.encode(payload.program).decode()}"
    )


# ------------------------------------------------------------------------------------------ Spark: reading


def thermostat_facts(raw: DataFrame) -> DataFrame:
    """Journal rows -> thermostats' reports: ``device_id, home_id, version, t_us`` (device time, epoch
    microseconds) and the reported keys the learners read."""
    f = F.from_json(F.col("value").cast("string"), _FACT, {"allowNonNumericNumbers": "true"})
    facts = raw.select(f.alias("f")).where(
        F.col("f.type").isin(STATE_REPORTED, DEVICE_REGISTERED)
        & F.col("f.device_id").rlike(IDENTIFIER_PATTERN)
        & F.col("f.home_id").rlike(IDENTIFIER_PATTERN)
    )
    thermostats = (
        facts.where((F.col("f.type") == DEVICE_REGISTERED) & (F.col("f.payload.device_type") == DEVICE_TYPE))
        .select(F.col("f.device_id").alias("device_id"))
        .distinct()
    )
    at = F.coalesce(
        F.col("f.payload.device_time").try_cast("timestamp"), F.col("f.occurred_at").try_cast("timestamp")
    )
    reported = finite_struct(F.col("f.payload.reported"), _REPORTED)
    reports = facts.where(F.col("f.type") == STATE_REPORTED).select(
        F.col("f.device_id").alias("device_id"),
        F.col("f.home_id").alias("home_id"),
        F.col("f.version").alias("version"),
        F.unix_micros(at).alias("t_us"),
        *(reported[k.name].alias(k.name) for k in _REPORTED.fields),
    )
    return reports.where(F.col("t_us").isNotNull()).join(thermostats, "device_id")


def manual_changes(reports: DataFrame) -> DataFrame:
    """``device_id, home_id, time_zone, t_us, target_c`` of each manual change (module docstring)."""
    order = Window.partitionBy("device_id").orderBy("version")
    so_far = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # a report carries only the keys that changed: a change to the target already set has no target_c
    counted = (
        reports.withColumn("target_c", F.last("target_c", ignorenulls=True).over(so_far))
        .where(F.col("panel_changes").isNotNull())
        .withColumn("before", F.lag("panel_changes").over(order))
    )
    zones = (
        reports.where(F.col("time_zone").isNotNull())
        .groupBy("device_id")
        .agg(F.max_by("time_zone", "version").alias("time_zone"))
    )
    return (
        counted.where(
            F.col("before").isNotNull()
            & (F.col("panel_changes") > F.col("before"))
            & F.col("target_c").isNotNull()
        )
        .select("device_id", "home_id", "t_us", "target_c")
        .join(zones, "device_id")
    )


# ------------------------------------------------------------------------- per device (applyInPandas)


def _moment(t_us: int) -> datetime:
    return datetime.fromtimestamp(t_us / 1_000_000, UTC)


def _fact_rows(facts: list[HomeFact]) -> pd.DataFrame:
    """The rows of ``OUTPUT_SCHEMA``, object columns even when empty: pandas makes an empty list float64,
    which Arrow can only cast to a string ChunkedArray, and Spark's batch refuses that (a device with no
    suggestion failed the whole job when other tests' thermostats shared the journal)."""
    return pd.DataFrame(
        {
            "fact_id": [str(f.fact_id) for f in facts],
            "home_id": [f.home_id for f in facts],
            "fact": [encode_home_fact(f).decode() for f in facts],
        },
        columns=["fact_id", "home_id", "fact"],
        dtype=object,
    )


def suggest_device(now: datetime, pdf: pd.DataFrame) -> pd.DataFrame:
    """``applyInPandas``: one device's manual changes -> its ``schedule.suggested`` fact, if a program
    is found (``now``: the job's time)."""
    if pdf.empty:
        return _fact_rows([])
    device_id, home_id, time_zone = (
        pdf["device_id"].iloc[0],
        pdf["home_id"].iloc[-1],
        pdf["time_zone"].iloc[0],
    )
    changes = [
        ManualChange(_moment(int(t)), float(target))
        for t, target in zip(pdf["t_us"], pdf["target_c"], strict=True)
    ]
    try:
        found = suggest_program(changes, str(time_zone))
    except (ValueError, KeyError):  # a zone this Python does not know (ZoneInfoNotFoundError)
        log.warning("%s: time zone %r unknown, no program learned", device_id, time_zone)
        return _fact_rows([])
    if found is None:
        return _fact_rows([])
    payload = SuggestionPayload(
        device_type=DEVICE_TYPE, program=found.program, evidence=found.evidence, entries=found.entries
    )
    fact = ScheduleSuggested(
        fact_id=suggestion_id(device_id, payload), home_id=home_id, device_id=device_id,
        occurred_at=now, recorded_at=now, payload=payload,
    )  # fmt: skip
    return _fact_rows([fact])


def fit_device(now: datetime, pdf: pd.DataFrame) -> pd.DataFrame:
    """``applyInPandas``: one device's reports -> its ``room.response_fitted`` fact, if any action has
    enough samples."""
    if pdf.empty:
        return _fact_rows([])
    pdf = pdf.sort_values("version")
    device_id, home_id = pdf["device_id"].iloc[0], pdf["home_id"].iloc[-1]

    def number(value: object) -> float | None:
        return None if value is None or value != value else float(value)  # type: ignore[arg-type]

    readings = [
        Reading(
            at=_moment(int(t)),
            ambient_c=number(ambient),
            outdoor_c=number(outdoor),
            hvac_action=action if isinstance(action, str) else None,
        )
        for t, ambient, outdoor, action in zip(
            pdf["t_us"], pdf["ambient_c"], pdf["outdoor_c"], pdf["hvac_action"], strict=True
        )
    ]
    response = fit_room(
        response_samples(readings), _moment(int(pdf["t_us"].min())), _moment(int(pdf["t_us"].max()))
    )
    if response is None:
        return _fact_rows([])
    learned = msgspec.json.encode(
        (response.heating, response.cooling, response.idle)
    ).decode()  # the parameters, not the span: the same fit is the same fact
    fact = RoomResponseFitted(
        fact_id=uuid.uuid5(LEARN_NAMESPACE, f"response\n{device_id}\n{learned}"), home_id=home_id,
        device_id=device_id, occurred_at=now, recorded_at=now, payload=response,
    )  # fmt: skip
    return _fact_rows([fact])


# ------------------------------------------------------------------------------------------ the job


@dataclass(frozen=True)
class Learned:
    """What one run published (and what it found already there)."""

    suggestions: list[ScheduleSuggested]
    responses: list[RoomResponseFitted]
    already_published: int


def published_ids(spark: SparkSession, settings: AnalyticsSettings) -> DataFrame:
    """``fact_id`` of every learned fact already on the home journal (a fact or two per device)."""
    raw = read_topic(spark, settings, settings.stack.topics.home_journal)
    text = F.col("value").cast("string")
    return (
        raw.select(
            F.get_json_object(text, "$.type").alias("type"),
            F.get_json_object(text, "$.fact_id").alias("fact_id"),
        )
        .where(F.col("type").isin(*PUBLISHED_TYPES))
        .select("fact_id")
        .distinct()
    )


def learn(
    spark: SparkSession,
    settings: AnalyticsSettings,
    now: datetime | None = None,
    *,
    until: datetime | None = None,
) -> Learned:
    """Learn from the whole history and publish what is new (module docstring); with ``until``, only from
    the reports whose device time is before it (``hearth bench learn`` trains on its first weeks and
    evaluates on the rest)."""
    at = now or datetime.now(UTC)

    def suggest(pdf: pd.DataFrame) -> pd.DataFrame:  # the job's time bound in (a partial warns in Spark)
        return suggest_device(at, pdf)

    def fit(pdf: pd.DataFrame) -> pd.DataFrame:
        return fit_device(at, pdf)

    reports = thermostat_facts(read_history(spark, settings))
    if until is not None:
        reports = reports.where(F.col("t_us") < int(until.timestamp() * 1_000_000))
    reports = reports.cache()
    try:
        suggested = manual_changes(reports).groupBy("device_id").applyInPandas(suggest, OUTPUT_SCHEMA)
        fitted = (
            reports.where(
                F.col("ambient_c").isNotNull()
                | F.col("outdoor_c").isNotNull()
                | F.col("hvac_action").isNotNull()
            )
            .select("device_id", "home_id", "version", "t_us", "ambient_c", "outdoor_c", "hvac_action")
            .groupBy("device_id")
            .applyInPandas(fit, OUTPUT_SCHEMA)
        )
        found = suggested.unionByName(fitted).collect()  # a fact or two per device: small
    finally:
        reports.unpersist()
    published = {row["fact_id"] for row in published_ids(spark, settings).collect()}
    rows = [row for row in found if row["fact_id"] not in published]
    facts = [decode_home_fact(row["fact"]) for row in rows]
    if rows:
        publish(spark, settings, [(row["home_id"], row["fact"]) for row in rows])
    learned = Learned(
        suggestions=[f for f in facts if isinstance(f, ScheduleSuggested)],
        responses=[f for f in facts if isinstance(f, RoomResponseFitted)],
        already_published=len(found) - len(rows),
    )
    log.info(
        "learned: %d suggestions, %d room responses published (%d found already published)",
        len(learned.suggestions), len(learned.responses), learned.already_published,
    )  # fmt: skip
    return learned


def publish(spark: SparkSession, settings: AnalyticsSettings, records: list[tuple[str, str]]) -> None:
    """The facts to the home journal, keyed by home (a home's facts share a partition, in order)."""
    frame = spark.createDataFrame(records, "key string, value string")
    (
        frame.write.format("kafka")
        .option("kafka.bootstrap.servers", settings.stack.kafka_bootstrap_servers)
        .option("topic", settings.stack.topics.home_journal)
        .option("kafka.acks", "all")
        .save()
    )


def run_learn(settings: AnalyticsSettings, *, spark: SparkSession | None = None) -> Learned:
    """``hearth analytics learn``: a session (unless given), then ``learn``."""
    from hearth_analytics.spark import build_session

    return learn(spark or build_session(settings, "hearth-analytics-learn"), settings)
