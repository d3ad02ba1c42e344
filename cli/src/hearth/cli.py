"""``hearth``: the command line (see ../shared/CONTRACT.md, Command line).

This package (hearth-cli) holds the operator's commands: tokens, rebuild and verify, the archive,
campaigns, devices (quarantine, connect), automation backtests, the Spark jobs. It is in the services'
image, so it imports no dev package and nothing of Spark up front (``hearth.support.needs``). The dev packages
add their commands to the same ``hearth`` through the entry-point group ``hearth.commands``
(``add_dev_commands``): in the dev workspace every command of the contract is there, in an image only
the operator's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from hearth.groups.archive_cli import TableOption, archive_app, table_path
from hearth.groups.automation_cli import automation_app
from hearth.groups.campaign_cli import campaign_app
from hearth.groups.device_cli import device_app
from hearth.groups.token_cli import token_app
from hearth.support.needs import needs
from hearth.support.stack_dir import DEFAULT_HOME, Home

if TYPE_CHECKING:
    from hearth_read_models.rebuild.run import ReplayProgress

app = typer.Typer(
    help="Hearth: run, simulate, benchmark and operate the smart-home platform.", no_args_is_help=True
)
app.add_typer(token_app, name="token")
app.add_typer(device_app, name="device")
app.add_typer(archive_app, name="archive")
app.add_typer(campaign_app, name="campaign")
app.add_typer(automation_app, name="automation")
console = Console(stderr=True, soft_wrap=True)  # tokens and URLs stay whole, to copy
COMMANDS_GROUP = "hearth.commands"  # entry points: register(app: typer.Typer) -> None


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
def analytics(ctx: typer.Context) -> None:
    """Spark jobs: `stream` (rollups and training), `batch` (daily report), `train` (full retrain).

    Arguments go to `python -m hearth_analytics` (try `hearth analytics --help`).
    """
    with needs("analytics"):
        from hearth_analytics.__main__ import main as analytics_main

    raise typer.Exit(analytics_main(ctx.args or ["--help"]))


def _replay_progress(what: str) -> tuple[Progress, Callable[[ReplayProgress], None]]:
    """A progress bar over the journal's offsets, with events/s and the lag (end offsets - positions)."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn(
            "{task.fields[events]:,} events, {task.fields[rate]:,.0f} events/s, lag {task.fields[lag]:,}"
        ),
        TimeElapsedColumn(),
        console=console,
    )
    task = progress.add_task(what, total=None, events=0, rate=0.0, lag=0)

    def show(p: ReplayProgress) -> None:
        rate = p.events / p.elapsed_s if p.elapsed_s else 0.0
        progress.update(
            task, description=f"{what}: {p.phase}", total=p.end, completed=p.position, events=p.events,
            rate=rate, lag=p.lag,
        )  # fmt: skip

    return progress, show


@app.command()
def rebuild(
    batch_size: Annotated[int, typer.Option(help="Records per replay transaction")] = 50_000,
    swap: Annotated[
        bool, typer.Option(help="Swap the checked views in; --no-swap builds, checks, drops")
    ] = True,
    from_archive: Annotated[
        bool, typer.Option("--from-archive", help="Replay the journal's archive, then the journal's tail")
    ] = False,
    table: TableOption = None,
    home: Home = DEFAULT_HOME,
) -> None:
    """Replay the journal (or, --from-archive, its archive table and then the journal beyond it) into
    fresh read models, check them and swap them in; the live projector and the query API keep serving
    meanwhile (settings from HEARTH_* variables, as the services)."""
    from hearth_read_models.rebuild.run import RebuildFailed
    from hearth_read_models.rebuild.run import rebuild as run_rebuild
    from hearth_read_models.settings import ReadModelSettings

    archive = table_path(table, home) if from_archive else None
    progress, show = _replay_progress("rebuild")
    try:
        with progress:
            result = asyncio.run(
                run_rebuild(
                    ReadModelSettings(), swap=swap, batch_size=batch_size, on_progress=show, archive=archive
                )
            )
    except RebuildFailed as exc:
        console.print(f"[red bold]Rebuild failed, nothing swapped:[/] {exc}")
        raise typer.Exit(1) from exc
    checks = Table(title=f"checks of {result.schema}")
    for column in ("table", "rows", "replayed", "checksum"):
        checks.add_column(column)
    for c in result.checks:
        checks.add_row(c.table, f"{c.rows:,}", f"{c.expected_rows:,}", "equal" if c.ok else "differs")
    console.print(checks)
    console.print(
        f"replayed {result.events:,} records in {result.replay_s:.1f} s ({result.events_per_s:,.0f}/s)"
        + (f", {result.from_archive:,} of them from the archive {archive}" if archive is not None else "")
    )
    if result.skipped:
        console.print(f"[yellow]skipped {result.skipped:,} records it could not project[/] (dead letters)")
    if result.swapped:
        console.print(
            f"[green]swapped in[/] as generation {result.generation} in {result.swap_s:.2f} s; "
            f"{result.twins_refreshed:,} twins changed (cache refreshed)"
        )


@app.command()
def verify(
    batch_size: Annotated[int, typer.Option(help="Records per replay transaction")] = 50_000,
    show: Annotated[int, typer.Option(help="Differences listed at most")] = 50,
    from_archive: Annotated[
        bool, typer.Option("--from-archive", help="Replay the journal's archive, then the journal's tail")
    ] = False,
    table: TableOption = None,
    home: Home = DEFAULT_HOME,
) -> None:
    """Replay the journal (or, --from-archive, its archive table and then the journal beyond it) into a
    scratch schema up to the live offsets and compare every table with the live views; exits 1 if any
    row differs, or if what it would replay is not the whole history (the scratch schema is dropped
    either way)."""
    from hearth_read_models.rebuild.run import RebuildFailed
    from hearth_read_models.rebuild.run import verify as run_verify
    from hearth_read_models.settings import ReadModelSettings

    archive = table_path(table, home) if from_archive else None
    progress, on_progress = _replay_progress("verify")
    try:
        with progress:
            verifying = run_verify(
                ReadModelSettings(), batch_size=batch_size, on_progress=on_progress, archive=archive
            )
            result = asyncio.run(verifying)
    except RebuildFailed as exc:
        console.print(f"[red bold]Not verified:[/] {exc}")
        raise typer.Exit(1) from exc
    total = sum(result.counts.values())
    if not total:
        console.print(
            f"[green]The live views equal a replay of the journal[/] ({result.events:,} records"
            + (f", the archive {archive} first)." if archive is not None else ").")
        )
        return
    shown = Table(title=f"{total:,} rows differ from a replay of the journal")
    for column in ("table", "key", "difference", "columns"):
        shown.add_column(column, overflow="fold")
    for d in result.differences[:show]:
        shown.add_row(d.table, d.key, d.kind, ", ".join(d.columns) if d.kind == "differs" else "")
    console.print(shown)
    console.print("per table: " + ", ".join(f"{name} {n:,}" for name, n in result.counts.items() if n))
    raise typer.Exit(1)


def add_dev_commands(cli: typer.Typer) -> None:
    """The commands of the dev packages installed beside this one: each names a ``register(app)`` in the
    entry-point group ``hearth.commands`` (hearth-devstack: up, down, status; hearth-simulator: simulate;
    hearth-bench: bench). In the services' image none is installed, so only the operator's are there."""
    for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        register: Callable[[typer.Typer], None] = entry.load()
        register(cli)


add_dev_commands(app)


def main() -> None:
    app()
