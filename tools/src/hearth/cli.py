"""``hearth``: the command line (see ../shared/CONTRACT.md, Command line)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from hearth import cli_stack
from hearth.admin_http import Home  # the --stack-dir option every command shares
from hearth.archive_cli import TableOption, archive_app, table_path
from hearth.automation_cli import automation_app
from hearth.bench_cli import bench_app
from hearth.campaign_cli import campaign_app
from hearth.device_cli import device_app
from hearth.stack.local import DEFAULT_HOME, token_secret
from hearth.token_cli import token_app
from hearth_shared.auth import create_token
from hearth_shared.settings import StackSettings

if TYPE_CHECKING:
    from hearth_read_models.rebuild.run import ReplayProgress

app = typer.Typer(
    help="Hearth: run, simulate, benchmark and operate the smart-home platform.", no_args_is_help=True
)
app.add_typer(token_app, name="token")
app.add_typer(bench_app, name="bench")
app.add_typer(device_app, name="device")
app.add_typer(archive_app, name="archive")
app.add_typer(campaign_app, name="campaign")
app.add_typer(automation_app, name="automation")
console = Console(stderr=True, soft_wrap=True)  # tokens and URLs stay whole, to copy

app.command("up")(cli_stack.up)
app.command("down")(cli_stack.down)
app.command("status")(cli_stack.status)


@app.command()
def simulate(
    devices: Annotated[int, typer.Option(help="Register this many devices first (as many of each type)")] = 0,
    rate: Annotated[float, typer.Option(help="Reports per second per device")] = 1.0,
    home_id: Annotated[
        str, typer.Option("--home", help="Home of the devices registered with --devices")
    ] = "sim",
    api: Annotated[str, typer.Option(help="Command API used to register devices")] = "http://127.0.0.1:8000",
    mqtt_port: Annotated[
        int, typer.Option(help="The stack's MQTT listener for its components (--mqtt-platform-port)")
    ] = 1884,
    home: Home = DEFAULT_HOME,
) -> None:
    """Play the simulated devices (registered with "simulated": true) over MQTT until Ctrl-C, as a hub
    with the stack's simulator credential."""
    from hearth.simulator.fleet import FleetOptions, MqttEndpoint, run_fleet
    from hearth.simulator.registration import register_fleet, split_evenly
    from hearth.stack.mosquitto import SIMULATOR_ACCOUNT

    stack = StackSettings(token_secret=token_secret(home.resolve()))
    secret = home.resolve() / "data" / "mosquitto" / "access" / f"{SIMULATOR_ACCOUNT}.secret"
    if not secret.exists():
        console.print(f"[red]No simulator credential in {secret}: start the stack (hearth up) first.[/]")
        raise typer.Exit(1)
    mqtt = MqttEndpoint(port=mqtt_port, username=SIMULATOR_ACCOUNT, password=secret.read_text().strip())

    async def main() -> None:
        if devices:
            admin = create_token(stack.token_secret, admin=True)
            await register_fleet(api, admin, home_id, split_evenly(devices))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_fleet(stack.kafka_bootstrap_servers, stack.topics, FleetOptions(rate=rate), mqtt, stop)

    asyncio.run(main())


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
def analytics(ctx: typer.Context) -> None:
    """Spark jobs: `stream` (rollups and training), `batch` (daily report), `train` (full retrain).

    Arguments go to `python -m hearth_analytics` (try `hearth analytics --help`).
    """
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
) -> None:
    """Replay the journal into a scratch schema up to the live offsets and compare every table with the
    live views; exits 1 if any row differs (the scratch schema is dropped either way)."""
    from hearth_read_models.rebuild.run import verify as run_verify
    from hearth_read_models.settings import ReadModelSettings

    progress, on_progress = _replay_progress("verify")
    with progress:
        result = asyncio.run(run_verify(ReadModelSettings(), batch_size=batch_size, on_progress=on_progress))
    total = sum(result.counts.values())
    if not total:
        console.print(f"[green]The live views equal a replay of the journal[/] ({result.events:,} records).")
        return
    table = Table(title=f"{total:,} rows differ from a replay of the journal")
    for column in ("table", "key", "difference", "columns"):
        table.add_column(column, overflow="fold")
    for d in result.differences[:show]:
        table.add_row(d.table, d.key, d.kind, ", ".join(d.columns) if d.kind == "differs" else "")
    console.print(table)
    console.print("per table: " + ", ".join(f"{name} {n:,}" for name, n in result.counts.items() if n))
    raise typer.Exit(1)


def main() -> None:
    app()
