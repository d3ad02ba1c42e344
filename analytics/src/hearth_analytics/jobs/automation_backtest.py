"""Automation backtests over long stretches, as a Spark batch job: the journal's history (the archive plus
the journal's tail, ``hearth_analytics.sources.history``) replayed through the automations' triggers and
conditions, acting on nothing. ``hearth automation backtest`` runs it for stretches the query API's
in-process backtest should not read in a request (``POST /v1/automations/{id}/backtest``).

The same result as the query API's, by construction: both select the stretch, order a home's facts and
feed them to the rules as ``hearth_shared.domain.automation_replay`` says, and both decode each record
with ``hearth_shared.domain.storable.decode_fact`` (a record it refuses is left out by both). Here:

1. Spark keeps the records whose Kafka timestamp is in the stretch (``record_ms``) and whose envelope
   names one of the automations' homes: the archive's typed envelope columns (``archive_layout``; no
   JSON read), the journal's tail by a JSON read of four envelope fields (no payload);
2. repartitions them by home and sorts each partition by home, then ``REPLAY_ORDER``: a home's facts
   are one run of rows in one partition, in replay order (Spark's sort spills, so a home's stretch need
   not fit in memory);
3. ``mapInArrow`` (Python workers, Arrow batches: no row pickling) decodes each record, keeps those
   ``in_stretch``, and feeds them through one ``HomeReplay`` per home (every automation of the home at
   once, in the home's zone), then, when the home's rows end, fires what is due before the stretch's end
   (``finish``: ``for_s`` timers, time triggers) and yields each automation's ``BacktestResult``
   (msgspec JSON). The record is decoded from its bytes (``value``) there, not from the archive's typed
   reading columns: the rules read the whole fact as the live engine and the query API's backtest do,
   through the one decoder, which is what makes the three agree; Spark's selection and sort read no
   JSON of archived records.

An automation whose home has no fact in the stretch is replayed over no facts on the driver (its time
triggers still fire). The automations' definitions and the homes' zones come from the home journal
(``home_journal_view``), so the job needs only Kafka and the archive: no API, no database.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime

import msgspec
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.history import fold_home_journal, history_sources
from hearth_analytics.sources.schema import envelope_struct
from hearth_shared.domain.automation import Automation
from hearth_shared.domain.automation_replay import (
    REPLAY_ORDER,
    BacktestResult,
    HomeReplay,
    backtest,
    in_stretch,
    record_ms,
    replayed,
)
from hearth_shared.domain.home_view import DEFAULT_TIMEZONE, HomesView
from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.events import MalformedRecord

# The envelope fields Spark reads to select and order the records (the rest is decoded in Python).
_ENVELOPE = envelope_struct("home_id", "device_id", "version", "recorded_at")
RESULT_SCHEMA = "automation_id string, result binary"


def _replay_partition(
    automations_json: bytes, zones: dict[str, str], start: datetime, end: datetime
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: one partition's rows (``home_id``, ``value``; a home's rows together,
    in replay order) -> one row per automation of each home seen."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        by_home: dict[str, list[Automation]] = {}
        for automation in msgspec.json.decode(automations_json, type=list[Automation]):
            by_home.setdefault(automation.home_id, []).append(automation)
        home: str | None = None
        replay: HomeReplay | None = None
        for batch in batches:
            homes = batch.column("home_id").to_pylist()
            values = batch.column("value").to_pylist()
            done: list[HomeReplay] = []
            for home_id, value in zip(homes, values, strict=True):
                if home_id != home:
                    if replay is not None:
                        replay.finish()
                        done.append(replay)
                    home, replay = home_id, HomeReplay(by_home[home_id], start, end, zones[home_id])
                try:
                    event = decode_fact(value)
                except MalformedRecord:
                    continue
                if replay is not None and in_stretch(event, home_id, start, end):
                    replay.feed(replayed(event))
            if done:
                yield _results(done)
        if replay is not None:
            replay.finish()
            yield _results([replay])

    return run


def _results(replays: Sequence[HomeReplay]) -> pa.RecordBatch:
    ids, results = [], []
    for replay in replays:
        for automation_id, result in replay.results.items():
            ids.append(str(automation_id))
            results.append(msgspec.json.encode(result))
    return pa.RecordBatch.from_arrays(
        [pa.array(ids, pa.string()), pa.array(results, pa.binary())], names=["automation_id", "result"]
    )


def _in_stretch(kafka_timestamp: Column, start: datetime, end: datetime) -> Column:
    return (kafka_timestamp >= F.timestamp_millis(F.lit(record_ms(start)))) & (
        kafka_timestamp < F.timestamp_millis(F.lit(record_ms(end)))
    )


def _stretch_rows(
    spark: SparkSession, settings: AnalyticsSettings, start: datetime, end: datetime
) -> DataFrame:
    """The history's records in the stretch: ``home_id``, ``device_id``, ``version``, ``recorded_at``
    (``REPLAY_ORDER``'s columns) and ``value``; the archive's from its typed envelope columns, the
    tail's from a JSON read of those four fields."""
    sources = history_sources(spark, settings)
    envelope = F.from_json(F.col("value").cast("string"), _ENVELOPE)
    tail = (
        sources.journal.where(_in_stretch(F.col("timestamp"), start, end))
        .select(envelope.alias("e"), "value")
        .select(
            F.col("e.home_id").alias("home_id"),
            F.col("e.device_id").alias("device_id"),
            F.col("e.version").alias("version"),
            F.col("e.recorded_at").try_cast("timestamp").alias("recorded_at"),
            "value",
        )
    )
    if sources.archive is None:
        return tail
    archived = sources.archive.where(_in_stretch(F.col("kafka_timestamp"), start, end)).select(
        "home_id", "device_id", "version", "recorded_at", "value"
    )
    return archived.unionByName(tail)


def spark_backtest(
    spark: SparkSession,
    settings: AnalyticsSettings,
    automations: Sequence[Automation],
    start: datetime,
    end: datetime,
    zones: Mapping[str, str] | None = None,
) -> dict[uuid.UUID, BacktestResult]:
    """Each automation's backtest over ``[start, end)`` of the history (archive plus the journal's tail);
    ``zones``: the homes' time zones (``HomesView.timezone``; a home not in it is in the default zone)."""
    homes = sorted({a.home_id for a in automations})
    zone_of = {home: (zones or {}).get(home, DEFAULT_TIMEZONE) for home in homes}
    rows = (
        _stretch_rows(spark, settings, start, end)
        .where(F.col("home_id").isin(homes))
        .repartition(settings.shuffle_partitions, "home_id")
        .sortWithinPartitions("home_id", *REPLAY_ORDER)
        .select("home_id", "value")
    )
    encoded = msgspec.json.encode(list(automations))
    found = rows.mapInArrow(_replay_partition(encoded, zone_of, start, end), RESULT_SCHEMA).collect()
    # a home without a fact in the stretch: its time triggers still fire
    results = {a.automation_id: backtest(a, (), start, end, zone_of[a.home_id]) for a in automations}
    for row in found:
        results[uuid.UUID(row["automation_id"])] = msgspec.json.decode(row["result"], type=BacktestResult)
    return results


def home_journal_view(settings: AnalyticsSettings) -> HomesView:
    """The home journal folded: its automations (switched off and suspended ones too), homes' zones."""
    view = HomesView()
    fold_home_journal(settings, view.apply, "backtest")
    return view


def automations_from_home_journal(settings: AnalyticsSettings) -> dict[uuid.UUID, Automation]:
    """Every automation the home journal defines (switched off and suspended ones too), by id."""
    view = home_journal_view(settings)
    return {automation_id: state.definition for automation_id, state in view.automations.items()}
