"""``hearth automation backtest AUTOMATION_ID --from ... [--to ...]``: when an automation would have fired
over a stretch of the journal, acting on nothing: a summary, a chart of its runs per hour, day or week
(rich), and a table of when (the first 100 runs).

Two paths, one answer (``hearth_shared.domain.automation_replay`` says what both agree on):

* **in-process** (a stretch up to ``--spark-after``, default 7 days): ``POST
  /v1/automations/{id}/backtest`` on the query API (``--api``) with an admin token signed with the local
  stack's secret (``--stack-dir``; HEARTH_TOKEN_SECRET wins). The query API reads the journal in the
  request, up to a bound: an answer that says ``complete: false`` is run again through Spark.
* **Spark** (``--spark``, or a longer stretch): ``hearth_analytics.jobs.automation_backtest`` in this process
  (``local[2]`` unless ``--master``), over the archive plus the journal's tail; the definition comes from
  the home journal. The archive: HEARTH_ANALYTICS_ARCHIVE_URL, else the local stack's. The query API
  carries no Spark (its image has no pyspark), hence here, with the ``spark`` extra
  (``hearth.support.needs``).

``--json`` prints the result as JSON on stdout instead of the tables.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.table import Table

from hearth.support.needs import needs
from hearth.support.stack_dir import DEFAULT_HOME, Home, archive_dir, token_secret
from hearth_shared.schema.auth import create_token, parse_duration

automation_app = typer.Typer(help="Automations: backtest one over the journal.", no_args_is_help=True)
console = Console(stderr=True, soft_wrap=True)

BAR_WIDTH = 40
MAX_ROWS = 60  # chart rows; beyond, only the buckets with runs are shown


def parse_moment(text: str, *, now: datetime, other: datetime | None = None) -> datetime:
    """An ISO date or date-time (UTC when it names no offset), ``now``, or a duration (``7d``, ``12h``)
    before ``other`` (the stretch's end)."""
    value = text.strip()
    if value == "now":
        return now
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        try:
            span = parse_duration(value)
        except ValueError:
            hint = f"{text!r}: give an ISO date-time, 'now', or a duration like 7d"
            raise typer.BadParameter(hint) from None
        if not isinstance(span, timedelta):
            raise typer.BadParameter(f"{text!r}: a stretch has an end") from None
        return (other or now) - span
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def buckets(
    fired_by_hour: dict[str, int], start: datetime, end: datetime
) -> tuple[str, list[tuple[str, int]]]:
    """Runs per hour (stretches up to 3 days), per day (up to 92 days) or per week (from Monday), every
    bucket of the stretch in order (only those with runs when there would be more than ``MAX_ROWS``)."""
    span = end - start
    unit = "hour" if span <= timedelta(days=3) else "day" if span <= timedelta(days=92) else "week"

    def floor(at: datetime) -> datetime:
        at = at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        if unit == "hour":
            return at
        at = at.replace(hour=0)
        return at if unit == "day" else at - timedelta(days=at.weekday())

    step = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}[unit]
    counts: dict[datetime, int] = {}
    for hour, n in fired_by_hour.items():
        key = floor(datetime.fromisoformat(hour))
        counts[key] = counts.get(key, 0) + n
    every: list[datetime] = []
    at = floor(start)
    while at < end and len(every) <= MAX_ROWS:
        every.append(at)
        at += step
    keys = every if len(every) <= MAX_ROWS else sorted(counts)
    label = "%Y-%m-%d %H:00" if unit == "hour" else "%Y-%m-%d"
    return unit, [(k.strftime(label), counts.get(k, 0)) for k in keys]


def chart(unit: str, rows: list[tuple[str, int]]) -> Table:
    table = Table(title=f"runs per {unit} (UTC)", title_justify="left", box=None, pad_edge=False)
    table.add_column(unit)
    table.add_column("runs", justify="right")
    table.add_column("")
    top = max((n for _, n in rows), default=0)
    for label, n in rows:
        bar = "█" * max(1, round(n / top * BAR_WIDTH)) if n else ""
        table.add_row(label, str(n), f"[cyan]{bar}[/]")
    return table


def show(result: dict[str, Any], start: datetime, end: datetime, how: str) -> None:
    out = Console(soft_wrap=True)
    out.print(
        f"automation {result['automation_id']} from {start.isoformat()} to {end.isoformat()} ({how}): "
        f"{result['facts']:,} facts of its home, {result['triggered']:,} triggered it, "
        f"[bold]{result['fired']:,} would have fired[/] (nothing was acted on)"
    )
    if not result["fired"]:
        return
    out.print(chart(*buckets(result["fired_by_hour"], start, end)))
    table = Table("#", "would have fired at (UTC)", title_justify="left", box=None, pad_edge=False)
    for i, at in enumerate(result["fired_at"], 1):
        table.add_row(str(i), datetime.fromisoformat(at).astimezone(UTC).isoformat(sep=" "))
    if result["fired"] > len(result["fired_at"]):
        table.caption = f"the first {len(result['fired_at'])} of {result['fired']:,}"
    out.print(table)


def via_api(api: str, home: Path, automation_id: uuid.UUID, start: datetime, end: datetime) -> dict[str, Any]:
    token = create_token(token_secret(home.resolve()), admin=True)
    body = {"from": start.isoformat(), "to": end.isoformat()}
    with httpx.Client(base_url=api, headers={"Authorization": f"Bearer {token}"}, timeout=300.0) as client:
        try:
            response = client.post(f"/v1/automations/{automation_id}/backtest", json=body)
        except httpx.HTTPError as exc:
            console.print(f"[red]the query API at {api} cannot be reached[/] ({exc}); try --spark")
            raise typer.Exit(1) from None
    if response.status_code >= 400:
        console.print(f"[red]{response.status_code}[/red] {response.text}")
        raise typer.Exit(1)
    return dict(response.json())


def via_spark(
    master: str | None, home: Path, automation_id: uuid.UUID, start: datetime, end: datetime
) -> dict[str, Any]:
    import msgspec

    with needs("automation backtest --spark"):
        from pyspark.sql import SparkSession

        from hearth_analytics.jobs.automation_backtest import home_journal_view, spark_backtest
        from hearth_analytics.settings import AnalyticsSettings
        from hearth_analytics.spark import build_session

    archive = os.environ.get("HEARTH_ANALYTICS_ARCHIVE_URL") or str(archive_dir(home.resolve() / "data"))
    settings = AnalyticsSettings(archive_url=archive)
    if master:
        settings = settings.model_copy(update={"master": master})
    with console.status("reading the automations from the home journal ..."):
        view = home_journal_view(settings)
    state = view.automations.get(automation_id)
    automation = state.definition if state is not None else None
    if automation is None:
        console.print(f"[red]no automation {automation_id} in the home journal[/]")
        raise typer.Exit(1)
    where = settings.archive_location()
    with console.status(f"Spark: replaying the archive ({where}) and the journal's tail ..."):
        running = SparkSession.getActiveSession()  # one this process runs already is not ours to stop
        spark = build_session(settings, "hearth-automation-backtest")
        try:
            zones = {automation.home_id: view.timezone(automation.home_id)}
            result = spark_backtest(spark, settings, [automation], start, end, zones)[automation_id]
        finally:
            if running is None:
                spark.stop()
    return {
        "automation_id": str(automation_id),
        "from": start.isoformat(),
        "to": end.isoformat(),
        **msgspec.to_builtins(result),
        "complete": True,
    }


@automation_app.command("backtest")
def automation_backtest(
    automation_id: Annotated[uuid.UUID, typer.Argument(help="The automation")],
    start_text: Annotated[str, typer.Option("--from", help="Start: ISO date-time (UTC if no offset), or 7d")],
    end_text: Annotated[str, typer.Option("--to", help="End (excluded): ISO date-time, or now")] = "now",
    spark: Annotated[
        bool | None, typer.Option("--spark/--no-spark", help="Through Spark (default: beyond --spark-after)")
    ] = None,
    spark_after: Annotated[str, typer.Option(help="Longer stretches go through Spark (or never)")] = "7d",
    master: Annotated[str | None, typer.Option(help="Spark master (default: local[2])")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON")] = False,
    api: Annotated[str, typer.Option(help="The query API")] = "http://127.0.0.1:8001",
    home: Home = DEFAULT_HOME,
) -> None:
    """When the automation would have fired over [from, to) of the journal; acts on nothing."""
    now = datetime.now(UTC)
    end = parse_moment(end_text, now=now)
    start = parse_moment(start_text, now=now, other=end)
    if end <= start:
        raise typer.BadParameter("--to must be after --from", param_hint="--to")
    try:
        threshold = parse_duration(spark_after)  # "never": only with --spark
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--spark-after") from None
    long_stretch = isinstance(threshold, timedelta) and end - start > threshold
    use_spark = spark if spark is not None else long_stretch
    if not use_spark:
        result = via_api(api, home, automation_id, start, end)
        if not result.get("complete", True):
            partly = "[yellow]the query API read only part of this stretch (its bound)"
            if spark is False:
                console.print(f"{partly}; see --spark[/]")
            else:
                console.print(f"{partly}: again through Spark[/]")
                use_spark = True
    if use_spark:
        result = via_spark(master, home, automation_id, start, end)
    if as_json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return
    show(result, start, end, "Spark" if use_spark else "query API")
