"""Poison facts in the journal as the analytics jobs read it (``parse_journal``, shared by the streaming
rollups, the training and the batch report): left out or read as null, never a failure and never a NaN
in a mean."""

from __future__ import annotations

from typing import Any

import pytest

from hearth_shared.schema.events import (
    DeviceRegistered,
    DeviceRegisteredPayload,
    StateReported,
    StateReportedPayload,
    encode,
)
from tests.integration.test_projector import T0, Device

pytestmark = pytest.mark.integration


def _poison_values() -> list[bytes]:
    """A registration, a good reading, then what no job may fail on or average: not JSON, non-finite and
    wrong-typed numbers, ids with a NUL and a space (offsets 0-8)."""
    device = Device("th-1", "h-1")
    registered = encode(device(DeviceRegistered, DeviceRegisteredPayload(device_type="thermostat", name="n")))

    def report(ambient: str, device_id: str = "th-1") -> bytes:
        state = {"ambient_c": 12345.5, "humidity_pct": 40.0}
        fact = encode(
            device(StateReported, StateReportedPayload(reported=state, device_seq=1, device_time=T0))
        )
        return fact.replace(b"12345.5", ambient.encode()).replace(b'"th-1"', f'"{device_id}"'.encode())

    return [
        registered,
        report("20.5"),
        b"\xff not json",
        report("NaN"),
        report("Infinity"),
        report("1e999"),
        report('"hot"'),
        report("30.0", device_id="th\\u00001"),
        report("30.0", device_id="th 1"),
    ]


def _poison_journal(spark: Any) -> Any:
    """``_poison_values`` as Kafka source rows (partition 0, offsets 0-8)."""
    return spark.createDataFrame(
        [(0, i, v, T0) for i, v in enumerate(_poison_values())],
        "partition int, offset long, value binary, timestamp timestamp",
    )


@pytest.mark.timeout(600)  # Spark's start, like the other analytics tests
def test_poison_facts_neither_fail_nor_poison_the_analytics(spark: Any) -> None:
    """Every job reads the journal through ``parse_journal``: what it cannot use is left out or null, never
    a NaN in a mean (a NaN-poisoned model or rollup is one no consumer can read)."""
    from hearth_analytics.jobs.train import reading_stats
    from hearth_analytics.sources.schema import parse_journal, readings

    raw = _poison_journal(spark)
    facts = parse_journal(raw)
    assert sorted(r["offset"] for r in facts.collect()) == [0, 1, 3, 4, 5, 6]  # not JSON, bad ids: left out
    ambient = sorted((r["ambient_c"] is None, r["ambient_c"]) for r in readings(facts).collect())
    assert ambient == [(False, 20.5)] + [(True, None)] * 4  # NaN, Infinity, 1e999 and "hot" read as null
    [stats] = reading_stats(facts).where("metric = 'ambient_c'").collect()
    assert (stats["n"], stats["mean"]) == (1, 20.5)


@pytest.mark.timeout(600)
def test_the_finite_rebuild_of_a_payload_grows_with_its_fields_not_beyond(spark: Any) -> None:
    """Each device type adds columns to the parsed payload; the expression that reads non-finite numbers
    as null must grow linearly with them (a per-number ``withField`` chain grew about tenfold per number and
    ran Spark's code generator out of heap at seven)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StructField, StructType

    from hearth_analytics.sources.schema import finite_struct

    def plan_size(doubles: int) -> int:
        reported = StructType([StructField(f"m{i}", DoubleType()) for i in range(doubles)])
        schema = StructType([StructField("reported", reported), StructField("value", DoubleType())])
        raw = spark.createDataFrame([('{"reported": {"m0": 1e999, "m1": 2.5}, "value": 1}',)], "v string")
        fact = raw.select(F.from_json("v", schema).alias("f"))  # as parse_journal reads it: a column
        parsed = fact.select(finite_struct(F.col("f"), schema).alias("p"))
        if doubles == 4:
            assert parsed.select("p.reported.m0", "p.reported.m1", "p.value").first() == (None, 2.5, 1.0)
        return len(parsed._jdf.queryExecution().optimizedPlan().toString())

    # Half as many numbers again: linear growth is 1.3 times the plan (1,070 -> 1,431 characters), a
    # quadratic one 2.25 times; the withField chain was 120 times (25 KB -> 3 MB). Six numbers, not more,
    # so a regression fails here rather than running the shared session out of heap.
    small, large = plan_size(4), plan_size(6)
    assert large < 2 * small, (small, large)


@pytest.mark.timeout(600)
def test_the_report_reads_poison_the_same_from_the_archive_and_from_the_journal(spark: Any) -> None:
    """The daily report decodes the archive's typed columns and payload text (``archive_facts``) and the
    journal's values (``journal_facts``) apart: both leave out and null the same poison, as
    ``parse_journal`` does."""
    from pyspark.sql import functions as F

    from hearth_analytics.jobs.archive import archive_rows
    from hearth_analytics.sources.history_facts import FACT_COLUMNS, archive_facts, journal_facts

    raw = _poison_journal(spark)

    def rows(facts: Any) -> list[tuple[Any, ...]]:
        return sorted((tuple(r) for r in facts.select(*FACT_COLUMNS).collect()), key=repr)

    from_journal = rows(journal_facts(raw))
    archived = archive_rows(raw)
    assert archived.count() == len(_poison_values())  # the archive keeps every record, poison too
    assert from_journal == rows(archive_facts(archived))
    assert len(from_journal) == 6  # not JSON and the two bad ids left out
    readings = journal_facts(raw).where(F.col("type") == "device.state_reported")
    ambient = sorted((r["ambient_c"] is None, r["ambient_c"]) for r in readings.collect())
    assert ambient == [(False, 20.5)] + [(True, None)] * 4  # NaN, Infinity, 1e999 and "hot" read as null
    [registered] = journal_facts(raw).where(F.col("type") == "device.registered").collect()
    assert registered["device_type"] == "thermostat"
