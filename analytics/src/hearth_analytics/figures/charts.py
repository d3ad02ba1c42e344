"""PNG charts of the daily report (matplotlib, Agg backend: no display needed).

One chart per question a person asks of the fleet, per day: how long were devices in a state (heating,
cooling, a light on), what did they read (one chart per unit: °C, %...), how often did they report a
counted state (locks, jams, doors opened), did commands work, what looked odd, and which homes spend the
most time in those states. ``overview.png`` puts them all on one page (the charts' pixels, two a row).

Every figure a type declares (``hearth_shared.domain``: ``StateKey.rollup`` with its unit,
``StateMinutes``, ``StateCount``) is drawn with no edit here: a new type's readings join the chart of
their unit (or make one), its minutes and counts join theirs. What is here is presentation only: colours,
and how a unit is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
import matplotlib.image as mimage
import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from hearth_analytics.figures.daily_figures import METRICS, MINUTES_NAMES, STATE_COUNT_NAMES, TELEMETRY_SUMS
from hearth_shared.domain.registry import rollup_keys

Chart = Callable[[Axes, pd.DataFrame, pd.DataFrame], None]
DPI = 110  # every chart's resolution: 10 x 4.5 inches at 1100 x 495 pixels
# Fixed margins, wide enough for a day chart's axes (numbers and dates, a twin axis on the right): the
# constrained layout measured every label of every chart first, a third of drawing them (0.45 s of 1.3).
MARGINS = {"left": 0.08, "right": 0.9, "bottom": 0.1, "top": 0.9}

HEAT, COOL = "#e4572e", "#2e86de"
OUTCOME_COLOURS = {
    "converged": "#3bb273",
    "failed": "#e4572e",
    "rejected": "#f3a712",
    "expired": "#8d99ae",
    "superseded": "#c9c9c9",
    "open": "#ededed",
}
# Colours of the minutes figures the charts know; a new type's figures take the next of STATE_PALETTE.
STATE_COLOURS = {"heating_minutes": HEAT, "cooling_minutes": COOL, "on_minutes": "#f6c445"}
STATE_PALETTE = ("#3bb273", "#7b2cbf", "#8d99ae", "#2d3047", "#93b7be")
# The readings of one chart, in turn; the counts' bars too.
SERIES_PALETTE = (HEAT, COOL, "#3bb273", "#7b2cbf", "#f3a712", "#2d3047", "#93b7be", "#8d99ae")
UNIT_LABELS = {"degC": "°C", "%": "%", "": "value"}  # how a declared unit is written on an axis
SUMS = [
    *TELEMETRY_SUMS, "anomalies", "commands", "commands_converged", "commands_failed", "commands_rejected",
    "commands_expired", "commands_superseded", "commands_open",
]  # fmt: skip


def state_colours() -> dict[str, str]:
    """A colour for every minutes figure, in the types' order."""
    spare = iter(STATE_PALETTE * (1 + len(MINUTES_NAMES) // len(STATE_PALETTE)))
    return {m: STATE_COLOURS.get(m) or next(spare) for m in MINUTES_NAMES}


def state_label(name: str) -> str:
    """``heating_minutes`` -> ``heating``, ``on_minutes`` -> ``on``, ``door_opens`` -> ``door opens``."""
    return name.removesuffix("_minutes").replace("_", " ")


def reading_groups() -> dict[str, tuple[str, ...]]:
    """The rolled-up readings the device types declare, by unit, in the types' order (e.g. ``degC``:
    ambient_c; ``%``: humidity_pct, battery_pct, brightness_pct): one chart each."""
    groups: dict[str, list[str]] = {}
    for key in rollup_keys():
        groups.setdefault(key.value.unit, []).append(key.name)
    return {unit: tuple(names) for unit, names in groups.items()}


def unit_slug(unit: str) -> str:
    """A unit as a file name's part: ``degC`` -> ``degC``, ``%`` -> ``pct``, none -> ``value``."""
    return re.sub(r"[^A-Za-z0-9]+", "_", {"%": "pct", "": "value"}.get(unit, unit)).strip("_") or "unit"


def per_day(homes: pd.DataFrame) -> pd.DataFrame:
    """Fleet totals per day (readings: means weighted by reading counts, and extremes)."""
    frame = homes.copy()
    frame["day"] = pd.to_datetime(frame["day"])
    totals = [f"{metric}_total" for metric in METRICS]
    for metric in METRICS:
        frame[f"{metric}_total"] = frame[f"{metric}_mean"].fillna(0.0) * frame[f"{metric}_count"]
    grouped = frame.groupby("day", sort=True)
    daily = grouped[[*SUMS, *totals]].sum()
    for metric in METRICS:
        count = daily[f"{metric}_count"]
        daily[f"{metric}_mean"] = daily[f"{metric}_total"] / count.where(count > 0)
        daily[f"{metric}_min"] = grouped[f"{metric}_min"].min()
        daily[f"{metric}_max"] = grouped[f"{metric}_max"].max()
    decided = daily[["commands_converged", "commands_failed", "commands_rejected", "commands_expired"]].sum(
        axis=1
    )
    daily["success_rate"] = daily["commands_converged"] / decided.where(decided > 0)
    return daily


def _dates(ax: Axes, days: pd.DatetimeIndex) -> None:
    """One tick per day (or per few days), the days' bars wholly inside the axes."""
    span = (days.max() - days.min()).days + 1
    # matplotlib.dates is untyped (matplotlib ships stubs for most modules, not for this one)
    locator = mdates.DayLocator(interval=max(1, math.ceil(span / 10)))  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%b %d"))  # type: ignore[no-untyped-call]
    ax.set_xlim(days.min() - pd.Timedelta(hours=12), days.max() + pd.Timedelta(hours=12))
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def draw_state_time(ax: Axes, daily: pd.DataFrame, homes: pd.DataFrame) -> None:
    bottom = pd.Series(0.0, index=daily.index)
    totals = []
    for name, colour in state_colours().items():
        hours = daily[name] / 60
        ax.bar(daily.index, hours, width=0.8, bottom=bottom, color=colour, label=state_label(name))
        bottom = bottom + hours
        totals.append(f"{hours.sum():,.1f} h {state_label(name)}")
    ax.set_title("Time in a state (device-hours): " + ", ".join(totals))
    ax.set_ylabel("hours")
    ax.legend(frameon=False)
    _dates(ax, daily.index)


def draw_readings(ax: Axes, daily: pd.DataFrame, unit: str, metrics: tuple[str, ...]) -> None:
    """Readings of one unit: each one's daily mean across the fleet, over its min-to-max band."""
    for metric, colour in zip(metrics, _series_colours(len(metrics)), strict=True):
        ax.fill_between(daily.index, daily[f"{metric}_min"], daily[f"{metric}_max"], color=colour, alpha=0.12)
        ax.plot(daily.index, daily[f"{metric}_mean"], color=colour, marker="o", label=f"{metric} (mean)")
    label = UNIT_LABELS.get(unit, unit)
    ax.set_title(f"Readings in {label} across the fleet: daily mean, and min to max")
    ax.set_ylabel(label)
    ax.legend(frameon=False, loc="upper left")
    _dates(ax, daily.index)


def readings_chart(unit: str, metrics: tuple[str, ...]) -> Chart:
    def draw(ax: Axes, daily: pd.DataFrame, homes: pd.DataFrame) -> None:
        draw_readings(ax, daily, unit, metrics)

    return draw


def draw_counts(ax: Axes, daily: pd.DataFrame, homes: pd.DataFrame) -> None:
    """Every state count the types declare (locks, unlocks, jams, doors opened...), side by side per day."""
    names = STATE_COUNT_NAMES
    width = 0.8 / max(len(names), 1)  # days: the bars of a day side by side within it
    for i, (name, colour) in enumerate(zip(names, _series_colours(len(names)), strict=True)):
        offset = pd.Timedelta(days=width * (i - (len(names) - 1) / 2))
        ax.bar(daily.index + offset, daily[name], width=width, color=colour, label=state_label(name))
    totals = ", ".join(f"{int(daily[n].sum()):,} {state_label(n)}" for n in names)
    ax.set_title(f"Counted states: {totals}" if names else "Counted states: none declared")
    ax.set_ylabel("readings")
    if names:
        ax.legend(frameon=False, fontsize="small", ncols=min(len(names), 5))
    _dates(ax, daily.index)


def _series_colours(n: int) -> list[str]:
    return [SERIES_PALETTE[i % len(SERIES_PALETTE)] for i in range(n)]


def draw_commands(ax: Axes, daily: pd.DataFrame, homes: pd.DataFrame) -> None:
    bottom = pd.Series(0, index=daily.index)
    for outcome, colour in OUTCOME_COLOURS.items():
        values = daily[f"commands_{outcome}"]
        if values.sum():
            ax.bar(daily.index, values, width=0.8, bottom=bottom, color=colour, label=outcome)
            bottom = bottom + values
    rate = ax.twinx()
    rate.plot(daily.index, daily["success_rate"], color="black", marker="o", label="success rate")
    rate.set_ylim(0, 1.05)
    rate.yaxis.set_major_formatter(PercentFormatter(1.0))
    rate.spines[["top"]].set_visible(False)
    total = daily[["commands_converged", "commands_failed", "commands_rejected", "commands_expired"]].sum()
    overall = total["commands_converged"] / total.sum() if total.sum() else float("nan")
    ax.set_title(f"Commands by outcome: {daily['commands'].sum():,} sent, "
                 + ("no decided ones" if pd.isna(overall) else f"{overall:.0%} succeeded"))  # fmt: skip
    ax.set_ylabel("commands")
    ax.set_ylim(0, max(float(bottom.max()), 1.0) * 1.3)  # headroom for the legend, in one row on top
    if ax.get_legend_handles_labels()[0]:  # a day range with no commands has no bars
        ax.legend(frameon=False, loc="upper left", fontsize="small", ncols=6)
    _dates(ax, daily.index)


def draw_anomalies(ax: Axes, daily: pd.DataFrame, homes: pd.DataFrame) -> None:
    per_1k = 1000 * daily["anomalies"] / daily["readings"].where(daily["readings"] > 0)
    ax.bar(daily.index, daily["anomalies"], width=0.8, color="#7b2cbf")
    overall = 1000 * daily["anomalies"].sum() / max(daily["readings"].sum(), 1)
    ax.set_title(f"Anomalies detected: {daily['anomalies'].sum():,} ({overall:.2f} per 1,000 readings)")
    ax.set_ylabel("anomalies")
    if per_1k.notna().any():
        rate = ax.twinx()
        rate.plot(daily.index, per_1k, color="black", marker=".", linestyle=":")
        rate.set_ylabel("per 1,000 readings")
        rate.spines[["top"]].set_visible(False)
    _dates(ax, daily.index)


def draw_top_homes(ax: Axes, daily: pd.DataFrame, homes: pd.DataFrame, top: int = 10) -> None:
    """The homes' ids label its rows: how wide they are is known once drawn (the constrained layout)."""
    if isinstance(ax.figure, Figure):
        ax.figure.set_layout_engine("constrained")
    totals = homes.groupby("home_id")[list(MINUTES_NAMES)].sum() / 60
    totals = totals.assign(total=totals.sum(axis=1)).sort_values("total").tail(top)
    left = pd.Series(0.0, index=totals.index)
    for name, colour in state_colours().items():
        ax.barh(totals.index.astype(str), totals[name], left=left, color=colour, label=state_label(name))
        left = left + totals[name]
    ax.set_title(f"Homes with the most device-hours in a state (top {min(top, len(totals))})")
    ax.set_xlabel("device-hours")
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(frameon=True, framealpha=0.9, loc="lower right")


def charts() -> dict[str, Chart]:
    """Every chart by its file's name, in the overview's order; one ``readings_<unit>`` per unit."""
    readings = {
        f"readings_{unit_slug(unit)}": readings_chart(unit, metrics)
        for unit, metrics in reading_groups().items()
    }
    return {
        "state_time": draw_state_time,
        **readings,
        "counts": draw_counts,
        "commands": draw_commands,
        "anomalies": draw_anomalies,
        "top_homes": draw_top_homes,
    }


def draw_all(homes: pd.DataFrame, out: Path) -> list[Path]:
    """Draw every chart (and the overview) into ``out``; returns the files written."""
    if homes.empty:
        return []
    out.mkdir(parents=True, exist_ok=True)
    daily = per_day(homes)
    written, pictures = [], []
    for name, draw in charts().items():
        fig, ax = plt.subplots(figsize=(10, 4.5), dpi=DPI)
        fig.subplots_adjust(**MARGINS)  # a chart whose labels are data sets its own layout (top_homes)
        draw(ax, daily, homes)
        pictures.append(_pixels(fig))
        path = out / f"{name}.png"
        mimage.imsave(path, pictures[-1])
        written.append(path)
    first, last = daily.index.min().date(), daily.index.max().date()
    path = out / "overview.png"
    mimage.imsave(path, overview(pictures, f"Hearth: {homes['home_id'].nunique()} homes, {first} to {last}"))
    return [*written, path]


def overview(pictures: list[npt.NDArray[np.uint8]], title: str) -> npt.NDArray[np.uint8]:
    """``pictures`` (RGBA, all of one size) two a row under ``title``: the overview page made of the charts
    as drawn (drawing them all again on one big figure took as long as drawing them the first time)."""
    height, width = pictures[0].shape[:2]
    heading = plt.figure(figsize=(2 * width / DPI, 0.6), dpi=DPI)
    heading.text(0.5, 0.5, title, ha="center", va="center", fontsize=16)
    top = _pixels(heading)[:, : 2 * width]
    rows = math.ceil(len(pictures) / 2)
    page = np.full((len(top) + rows * height, 2 * width, 4), 255, dtype=np.uint8)
    page[: len(top), : top.shape[1]] = top
    for i, picture in enumerate(pictures):
        row, column = divmod(i, 2)
        y, x = len(top) + row * height, column * width
        page[y : y + height, x : x + width] = picture
    return page


def _pixels(fig: Figure) -> npt.NDArray[np.uint8]:
    """The figure drawn (RGBA), and closed."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # type: ignore[no-untyped-call]
    pixels = np.array(canvas.buffer_rgba(), dtype=np.uint8)  # type: ignore[no-untyped-call]  # a copy
    plt.close(fig)
    return pixels
