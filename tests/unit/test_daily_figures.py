"""The daily report's columns and charts, derived from the device types: unique, readable from the parsed
journal (``schema.readings`` must carry every key a figure is counted from), no key or figure named in the
analytics themselves, and a new type's figures reaching them with no edit there."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql.types import DoubleType, StringType

from hearth_analytics.figures import charts
from hearth_analytics.figures.daily_figures import (
    COUNTS,
    CYCLES_NAMES,
    METRICS,
    MINUTES,
    STATE_COUNT_NAMES,
    TELEMETRY_SUMS,
)
from hearth_analytics.jobs.batch import COUNT_COLUMNS
from hearth_analytics.sources import schema
from hearth_shared.domain import registry
from hearth_shared.domain.device_type import DeviceType, StateCount, StateKey, Value

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


# A type the platform does not have: a CO2 sensor with a fan. Its figures must reach the analytics with
# no edit there (a rolled-up reading in a new unit, a counted state), and a key no figure reads must not.
AIR = DeviceType(
    name="air_sensor",
    description="A CO2 sensor with a fan",
    state=(
        StateKey("co2_ppm", Value("number", unit="ppm"), rollup=True),
        StateKey("fan", Value("string", values=("on", "off"))),
        StateKey("note", Value("string")),
    ),
    commands=(),
    settings=(),
    plan=lambda twin, command, params: ("", {}),
    counts=(StateCount("fan_starts", "fan", ("on",)),),
)


def test_the_reported_columns_are_the_keys_the_types_declare_for_a_figure() -> None:
    declared = {k.name: k for t in registry.DEVICE_TYPES.values() for k in t.all_state}
    columns = {f.name: f.dataType for f in schema.REPORTED.fields}
    assert set(columns) == set(registry.rollup_metrics()) | set(registry.counted_state_keys())
    assert set(columns) <= set(declared)  # no key named in the analytics themselves
    assert {"door", "lock_state", "hvac_action", "power"} <= set(columns)  # door: the lock's door_opens
    assert all(columns[m] == DoubleType() for m in registry.rollup_metrics())


def test_a_new_types_keys_become_columns_with_no_edit_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(registry.DEVICE_TYPES, AIR.name, AIR)

    struct = schema.reported_struct()

    columns = {f.name: f.dataType for f in struct.fields}
    assert columns["co2_ppm"] == DoubleType() and columns["fan"] == StringType()
    assert "note" not in columns  # read by no figure: not parsed


def test_the_readings_charts_are_one_per_declared_unit() -> None:
    assert charts.reading_groups() == {
        "degC": ("ambient_c", "outdoor_c"),
        "%": ("humidity_pct", "battery_pct", "brightness_pct"),
    }
    assert [n for n in charts.charts() if n.startswith("readings_")] == ["readings_degC", "readings_pct"]


def test_a_new_types_reading_gets_the_chart_of_its_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.DEVICE_TYPES, AIR.name, AIR)

    assert charts.reading_groups()["ppm"] == ("co2_ppm",)
    assert "readings_ppm" in charts.charts()


def _homes() -> pd.DataFrame:
    """Two homes over three days, with every column the report writes (made-up but consistent numbers)."""
    rows = []
    for day, home in itertools.product(("2026-11-20", "2026-11-21", "2026-11-22"), ("h1", "h2")):
        row: dict[str, object] = {"day": day, "home_id": home}
        for i, name in enumerate(charts.SUMS):
            row[name] = 3 + i + (home == "h2")
        for i, metric in enumerate(METRICS):
            base = 10.0 * (i + 1) + (5.0 if home == "h2" else 0.0)
            row |= {f"{metric}_mean": base, f"{metric}_min": base - 2, f"{metric}_max": base + 2}
        rows.append(row)
    return pd.DataFrame(rows)


def test_every_declared_figure_is_drawn(tmp_path: Path) -> None:
    homes = _homes()

    written = charts.draw_all(homes, tmp_path)

    assert sorted(p.name for p in written) == sorted(
        [f"{name}.png" for name in charts.charts()] + ["overview.png"]
    )
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)
    daily = charts.per_day(homes)
    for metric in METRICS:  # every reading's mean weighted by its count, and its extremes
        counts = homes[f"{metric}_count"]
        weighted = (homes[f"{metric}_mean"] * counts).groupby(homes["day"]).sum() / counts.groupby(
            homes["day"]
        ).sum()
        assert daily[f"{metric}_mean"].tolist() == pytest.approx(weighted.tolist())
        assert daily[f"{metric}_min"].tolist() == homes.groupby("day")[f"{metric}_min"].min().tolist()
    assert set(STATE_COUNT_NAMES) <= set(daily.columns) and "door_opens" in STATE_COUNT_NAMES


def test_the_overview_puts_the_charts_two_a_row_under_its_title() -> None:
    pictures = [np.full((50, 80, 4), (40 * (i + 1), 0, 0, 255), dtype=np.uint8) for i in range(3)]
    page = charts.overview(pictures, "Hearth: 2 homes")
    top = page.shape[0] - 2 * 50  # the title's strip
    assert top > 0 and page.shape == (top + 100, 160, 4)
    assert (page[top : top + 50, :80] == pictures[0]).all() and (
        page[top : top + 50, 80:] == pictures[1]
    ).all()
    assert (page[top + 50 :, :80] == pictures[2]).all()
    assert (page[top + 50 :, 80:] == 255).all()  # no fourth chart: white
    assert (page[:top, :, :3] < 128).any()  # the title's dark text
