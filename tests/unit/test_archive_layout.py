"""The archive's typed columns derived from the device types' declarations (``archive_layout``): every
declared key of every type gets a column typed from its JSON type, a new type's keys get theirs with no
archive code, a key two types declare with different types gets none (its value stays in the payload
text), and the first layout's columns are all in the table's schema (so one schema reads both)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyspark.sql.types import BooleanType, DoubleType, LongType, StringType

from hearth_analytics.sources.archive_layout import (
    ARCHIVE_COLUMNS,
    ARCHIVE_SCHEMA,
    LAYOUT_COLUMN,
    READING_COLUMNS,
    reading_columns,
)
from hearth_shared.domain.device_type import StateKey, Value
from hearth_shared.domain.registry import DEVICE_TYPES

pytestmark = pytest.mark.unit

LAYOUT_1 = (
    "kafka_partition", "kafka_offset", "kafka_timestamp", "event_id", "type", "schema_version", "device_id",
    "home_id", "version", "occurred_at", "recorded_at", "causation_id", "correlation_id", "payload", "value",
    "day",
)  # fmt: skip


def test_every_declared_key_has_a_column_typed_from_its_declaration() -> None:
    columns = {r.key: r for r in READING_COLUMNS}
    declared = {key.name: key.value.type for kind in DEVICE_TYPES.values() for key in kind.all_state}
    assert set(columns) == set(declared)
    spark_type = {
        "number": DoubleType(),
        "integer": LongType(),
        "string": StringType(),
        "boolean": BooleanType(),
    }
    for key, json_type in declared.items():
        assert columns[key].type == spark_type[json_type], key
        assert columns[key].column == f"reported__{key}"
    numeric = [k for k, t in declared.items() if t in ("number", "integer")]
    assert {"ambient_c", "humidity_pct", "battery_pct", "brightness_pct", "panel_changes"} <= set(numeric)
    assert all(f"reported__{k}" in ARCHIVE_COLUMNS for k in numeric)


def test_a_new_type_gets_its_columns_with_no_archive_code() -> None:
    lock = DEVICE_TYPES["lock"]
    meter = replace(lock, name="meter", state=(StateKey("power_w", Value("number")),
                                              StateKey("tampered", Value("boolean"))))  # fmt: skip
    columns = {r.key: r.type for r in reading_columns([*DEVICE_TYPES.values(), meter])}
    assert columns["power_w"] == DoubleType() and columns["tampered"] == BooleanType()
    assert set(columns) - {"power_w", "tampered"} == {r.key for r in READING_COLUMNS}


def test_a_key_declared_with_two_types_has_no_column() -> None:
    lock = DEVICE_TYPES["lock"]
    odd = replace(lock, name="odd", state=(StateKey("ambient_c", Value("string")),))  # thermostat: number
    keys = {r.key for r in reading_columns([*DEVICE_TYPES.values(), odd])}
    assert "ambient_c" not in keys and "humidity_pct" in keys


def test_one_schema_reads_both_layouts() -> None:
    assert set(LAYOUT_1) <= set(ARCHIVE_COLUMNS)
    assert ARCHIVE_COLUMNS[-2:] == (LAYOUT_COLUMN, "day")  # the partition column last, as the sink writes
    assert len(ARCHIVE_SCHEMA.fields) == len(set(ARCHIVE_COLUMNS))
