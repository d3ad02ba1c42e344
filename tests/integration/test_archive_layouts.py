"""The archive's typed columns and its two layouts (``hearth_analytics.sources.archive_layout``), on real
Spark, Kafka, PostgreSQL and Redis:

* ``archive_rows``: a state report's declared readings in typed columns and no payload text; a key no
  type declares, or a value its column cannot hold, keeps the whole payload text; other facts keep
  theirs; the daily report's facts read from those rows equal the journal's.
* an archive of both layouts (layout 1, written before the typed columns, then layout 2 in the same
  days, as an archive the new job continued): ``hearth archive verify`` passes, the daily report's facts
  equal the journal's, compaction merges the two layouts' files, and ``rebuild --from-archive`` equals a
  rebuild from the journal."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from hearth.groups.archive_cli import inspect_archive
from hearth_analytics.archive_files.archive_compact import compact_archive
from hearth_analytics.archive_files.archive_table import journal_ranges
from hearth_analytics.jobs.archive import archive_rows
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.archive_layout import ARCHIVE_COLUMNS, LAYOUT_COLUMN
from hearth_analytics.sources.history import read_archive
from hearth_analytics.sources.history_facts import FACT_COLUMNS, PARSED_TYPES, archive_facts, journal_facts
from hearth_analytics.sources.schema import read_journal
from hearth_read_models.rebuild.run import COMPARED, rebuild
from hearth_shared.adapters.archive_store import open_store
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import (
    DeviceRegistered,
    DeviceRegisteredPayload,
    StateReported,
    StateReportedPayload,
    encode,
)
from tests.integration.test_projector import T0, Device
from tests.support.archive import commit_by_hand, facts_across_days, produce, view_differences, views_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

# The columns of the archive's first layout (before issue 24), in its sink's order.
LAYOUT_1 = (
    "kafka_partition", "kafka_offset", "kafka_timestamp", "event_id", "type", "schema_version", "device_id",
    "home_id", "version", "occurred_at", "recorded_at", "causation_id", "correlation_id", "payload", "value",
    "day",
)  # fmt: skip
UPGRADED_AT = 50  # a partition's offsets below this were archived in layout 1, the rest in layout 2
SINK_COMPACT_INTERVAL = 10  # spark.sql.streaming.fileSink.log.compactInterval's default


def _fact_rows(facts: DataFrame) -> list[tuple[Any, ...]]:
    """The report's fact rows, sorted (a payload field of a fact type no figure reads, such as the
    ``command_id`` of ``command.accepted``, is read from the journal but not from the archive: masked)."""
    read = facts.withColumn("command_id", F.when(F.col("type").isin(*PARSED_TYPES), F.col("command_id")))
    return sorted((tuple(r) for r in read.select(*FACT_COLUMNS).collect()), key=repr)


def _records(spark: SparkSession) -> tuple[DataFrame, list[bytes]]:
    """A registration and six state reports as Kafka source rows (partition 0, offsets 0-6)."""
    device = Device("th-1", "h-1")

    def report(seq: int, state: dict[str, Any]) -> bytes:
        payload = StateReportedPayload(reported=state, device_seq=seq, device_time=T0)
        return encode(device(StateReported, payload))

    values = [
        encode(device(DeviceRegistered, DeviceRegisteredPayload(device_type="thermostat", name="n"))),
        report(1, {"ambient_c": 20.5, "hvac_action": "heating", "panel_changes": 3}),  # declared keys only
        report(2, {"ambient_c": 21.0, "mystery_c": 4}),  # a key no type declares
        report(3, {"ambient_c": "warm"}),  # a text where a number is declared
        report(4, {}),  # nothing changed: the seq moves on
        report(5, {"ambient_c": None}),  # a declared key without a value
        _with_payload_field(report(6, {"ambient_c": 21.5}), "note", "a field beyond the three"),
    ]
    rows = [(0, offset, value, T0) for offset, value in enumerate(values)]
    return spark.createDataFrame(
        rows, "partition int, offset long, value binary, timestamp timestamp"
    ), values


def _with_payload_field(value: bytes, name: str, text: str) -> bytes:
    """The fact with one more payload field (a newer device's, say): decodable, no column holds it."""
    fact = json.loads(value)
    fact["payload"][name] = text
    return json.dumps(fact).encode()


def test_typed_columns_hold_declared_readings_and_the_payload_keeps_the_rest(spark: Any) -> None:
    raw, values = _records(spark)
    archived = archive_rows(raw)
    assert tuple(archived.columns) == ARCHIVE_COLUMNS
    rows = {r["kafka_offset"]: r.asDict() for r in archived.collect()}
    registered, declared, undeclared, misfit, unchanged, valueless, extra = (rows[o] for o in range(7))
    payload = [json.loads(v)["payload"] for v in values]

    assert json.loads(registered["payload"]) == payload[0] and registered["device_seq"] is None
    assert declared["payload"] is None  # the columns hold it all
    typed = ("reported__ambient_c", "reported__hvac_action", "reported__panel_changes", "device_seq")
    assert tuple(declared[c] for c in typed) == (20.5, "heating", 3, 1)
    assert declared["device_time"] is not None and declared["reported__humidity_pct"] is None
    assert json.loads(undeclared["payload"]) == payload[2]  # kept whole ...
    assert undeclared["reported__ambient_c"] == 21.0  # ... and its declared keys in their columns too
    assert json.loads(misfit["payload"]) == payload[3] and misfit["reported__ambient_c"] is None
    assert unchanged["payload"] is None and unchanged["device_seq"] == 4
    assert json.loads(valueless["payload"]) == payload[5]  # a null is no reading: the text keeps it
    assert json.loads(extra["payload"]) == payload[6] and extra["reported__ambient_c"] == 21.5
    assert {r[LAYOUT_COLUMN] for r in rows.values()} == {2}
    assert _fact_rows(archive_facts(archived)) == _fact_rows(journal_facts(raw))  # the report reads the same


def _parquet_files(table: Path) -> set[str]:
    return {str(p) for p in table.rglob("part-*.parquet")}


async def test_an_archive_of_both_layouts_verifies_reports_compacts_and_rebuilds(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    records = facts_across_days(stack, 1_200, 16)
    await produce(stack, records)
    table = tmp_path / "archive"
    settings = AnalyticsSettings(stack=stack, checkpoint_dir=tmp_path / "ckpt", archive_url=str(table))
    raw = read_journal(spark, settings)
    rows = archive_rows(raw)
    before_upgrade = F.col("kafka_offset") < UPGRADED_AT
    whole_payload = F.from_json(F.col("value").cast("string"), "payload STRING")["payload"]
    old = rows.where(before_upgrade).withColumn("payload", whole_payload).select(*LAYOUT_1)
    old.write.partitionBy("day").parquet(str(table))
    old_files = _parquet_files(table)
    rows.where(~before_upgrade).write.mode("append").partitionBy("day").parquet(str(table))
    new_files = _parquet_files(table) - old_files
    assert old_files and new_files
    # as the sink logs ten batches: its .compact file at the tenth (Spark's default compactInterval)
    batches = [sorted(old_files), sorted(new_files), *([] for _ in range(SINK_COMPACT_INTERVAL - 2))]
    commit_by_hand(open_store(table), batches, compact_at=SINK_COMPACT_INTERVAL - 1)

    journal = await journal_ranges(stack)
    report = inspect_archive(table, journal, complete=True)
    assert report.check.ok and report.files == len(old_files) + len(new_files), report.check.problems()
    archived = read_archive(spark, settings)
    assert archived is not None
    assert {r[LAYOUT_COLUMN] for r in archived.select(LAYOUT_COLUMN).distinct().collect()} == {None, 2}
    expected = _fact_rows(journal_facts(raw))
    assert len(expected) == len(records) and _fact_rows(archive_facts(archived)) == expected

    compacted = compact_archive(table, before=date(2026, 11, 23), grace_s=0)
    assert [d.day for d in compacted.days] == ["2026-11-20", "2026-11-21"]
    for day in compacted.days:  # one file a day, with the rows of both layouts
        layouts = set(pq.read_table(day.path, columns=[LAYOUT_COLUMN])[0].to_pylist())
        assert layouts == {None, 2}, day
    after = read_archive(spark, settings)
    assert after is not None and _fact_rows(archive_facts(after)) == expected
    assert inspect_archive(table, journal, complete=True).check.ok

    journal_views, archive_views = views_settings(stack, "journal"), views_settings(stack, "layouts")
    by_journal = await rebuild(journal_views, batch_size=500)
    by_archive = await rebuild(archive_views, batch_size=500, archive=table)
    assert by_journal.swapped and by_archive.swapped
    assert by_archive.from_archive == by_archive.events == by_journal.events == len(records)
    differences = await view_differences(stack, journal_views.schema_name, archive_views.schema_name)
    assert differences == dict.fromkeys((t.name for t in COMPARED), 0)
