"""The daily report's columns, derived from the device types: unique, and readable from the parsed
journal (``schema.readings`` must carry every key a figure is counted from)."""

from __future__ import annotations

import pytest

from hearth_analytics import charts, schema
from hearth_analytics.batch import COUNT_COLUMNS
from hearth_analytics.daily_figures import COUNTS, CYCLES_NAMES, METRICS, MINUTES, TELEMETRY_SUMS

pytestmark = pytest.mark.unit


def test_every_column_a_home_sums_is_named_once() -> None:
    assert len(set(COUNT_COLUMNS)) == len(COUNT_COLUMNS)
    assert all(m.name.endswith("_minutes") for m in MINUTES)  # so <state>_cycles cannot meet a figure
    assert {"heating_cycles", "cooling_cycles", "on_cycles"} <= set(CYCLES_NAMES)


def test_the_figures_read_only_keys_the_parsed_readings_carry() -> None:
    assert {m.key for m in MINUTES} | {c.key for c in COUNTS} <= set(schema.STATE_KEYS)
    assert set(METRICS) <= {f.name for f in schema.REPORTED.fields}
    assert {"brightness_pct", "ambient_c"} <= set(METRICS)


def test_the_charts_sum_every_telemetry_figure_and_colour_every_state() -> None:
    assert set(TELEMETRY_SUMS) <= set(charts.SUMS)
    colours = charts.state_colours()
    assert set(colours) == {m.name for m in MINUTES} and len(set(colours.values())) == len(colours)
