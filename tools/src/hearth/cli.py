"""``hearth``: the command line (see ../shared/CONTRACT.md, Command line)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from hearth import cli_stack
from hearth.archive_cli import TableOption, archive_app, table_path
from hearth.campaign_cli import campaign_app
from hearth.device_cli import device_app
from hearth.stack.local import DEFAULT_HOME, token_secret
from hearth.token_cli import Home, token_app  # Home: the --stack-dir option every command shares
from hearth_shared.auth import create_token
from hearth_shared.settings import StackSettings

if TYPE_CHECKING:
    from hearth_read_models.rebuild import ReplayProgress

app = typer.Typer(
    help="Hearth: run, simulate, benchmark and operate the smart-home platform.", no_args_is_help=True
)
bench_app = typer.Typer(
    help="Benchmarks; figures go to bench/results/ and docs/BENCHMARKS.md.", no_args_is_help=True
)
app.add_typer(token_app, name="token")
app.add_typer(bench_app, name="bench")
app.add_typer(device_app, name="device")
app.add_typer(archive_app, name="archive")
app.add_typer(campaign_app, name="campaign")
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


@bench_app.command("broker")
def bench_broker(
    bootstrap: Annotated[
        str | None, typer.Option(help="A running broker; a temporary one when absent")
    ] = None,
    messages: int = 200_000,
    size: int = 200,
) -> None:
    """The floor: raw produce and consume rates of the broker with the project's client settings."""
    from hearth.bench.broker import main as broker_main

    broker_main(bootstrap=bootstrap, messages=messages, size=size)


@bench_app.command("actor")
def bench_actor(
    bootstrap: Annotated[
        str | None, typer.Option(help="A running broker; a temporary one when absent")
    ] = None,
    devices: int = 1000,
    events: Annotated[int, typer.Option(help="Telemetry reports queued for the worker")] = 200_000,
) -> None:
    """Device-agent throughput of one worker against the raw consume rate (and faust's own ceiling)."""
    from hearth.bench.actor import main as actor_main

    actor_main(bootstrap=bootstrap, devices=devices, events=events)


@bench_app.command("rebuild")
def bench_rebuild(
    events: Annotated[int, typer.Option(help="Journal facts to fill and replay")] = 5_000_000,
    devices: Annotated[int, typer.Option(help="Devices the facts are spread over")] = 10_000,
    batch_size: Annotated[int, typer.Option(help="Records per replay transaction")] = 50_000,
) -> None:
    """Rebuild throughput against the raw consume rate of the same journal (temporary servers)."""
    from hearth.bench.rebuild import main as rebuild_main

    rebuild_main(events=events, devices=devices, batch_size=batch_size)


@bench_app.command("archive")
def bench_archive(
    events: Annotated[int, typer.Option(help="Telemetry facts the journal holds (at least)")] = 200_000,
    devices: Annotated[int, typer.Option(help="Devices the facts are spread over")] = 1_000,
) -> None:
    """The archive job's sustained facts/s, and the daily report from the archive, against floors."""
    from hearth.bench.archive import main as archive_main

    archive_main(events=events, devices=devices)


@bench_app.command("batch")
def bench_batch(
    events: Annotated[int, typer.Option(help="Telemetry facts the journal holds (at least)")] = 5_000_000,
    devices: Annotated[int, typer.Option(help="Devices the facts are spread over")] = 10_000,
) -> None:
    """Batch replay rate of the Spark daily report against the raw consume rate (temporary broker)."""
    from hearth.bench.batch_replay import main as batch_main

    batch_main(events=events, devices=devices)


@bench_app.command("stream")
def bench_stream(
    rate: Annotated[
        list[float] | None,
        typer.Option(help="Telemetry facts/s per step (repeat; default 500 1000 2000 4000 8000 16000)"),
    ] = None,
    step: Annotated[float, typer.Option(help="Seconds per step (two training triggers)")] = 120.0,
    warmup: Annotated[float, typer.Option(help="Seconds at the first rate before the steps")] = 60.0,
    devices: Annotated[int, typer.Option(help="Devices the facts are spread over")] = 1000,
    rollup_trigger: Annotated[
        float | None, typer.Option(help="Rollup trigger, s (default: the job's)")
    ] = None,
    train_trigger: Annotated[
        float | None, typer.Option(help="Training trigger, s (default: the job's)")
    ] = None,
) -> None:
    """Highest telemetry rate the streaming job keeps up with, and its micro-batch latency (temp. broker)."""
    from hearth.bench.streaming import main as stream_main

    stream_main(
        devices=devices,
        rates=rate,
        step_s=step,
        warmup_s=warmup,
        rollup_trigger_s=rollup_trigger,
        train_trigger_s=train_trigger,
    )


@bench_app.command("loop")
def bench_loop(
    thermostats: Annotated[int, typer.Option(help="Simulated thermostats of the home")] = 10,
    drifting: Annotated[int, typer.Option(help="Thermostats made to drift, one after the other")] = 5,
    rate: Annotated[float, typer.Option(help="Telemetry reports/s per thermostat")] = 2.0,
    drift: Annotated[float, typer.Option(help="Drift of a drifting sensor, degC per hour")] = 720.0,
    train_trigger: Annotated[float, typer.Option(help="Training trigger of the streaming job, s")] = 5.0,
    min_count: Annotated[
        int, typer.Option(help="Readings a baseline slice needs (the model's min_count)")
    ] = 30,
) -> None:
    """Drifting reading -> anomaly fact, with streaming training, actor and simulator (temporary servers)."""
    from hearth.bench.loop import main as loop_main

    loop_main(
        thermostats=thermostats,
        drifting=drifting,
        rate=rate,
        drift_c_per_h=drift,
        train_trigger_s=train_trigger,
        min_count=min_count,
    )


@bench_app.command("roundtrip")
def bench_roundtrip(
    devices: Annotated[int, typer.Option(help="Simulated thermostats the commands go to")] = 500,
    rate: Annotated[
        list[float] | None, typer.Option(help="Commands per second (repeat for more; default 50 and 200)")
    ] = None,
    duration: Annotated[float, typer.Option(help="Seconds of commands per rate")] = 30.0,
    floor_duration: Annotated[
        float, typer.Option(help="Seconds of GET /healthz per rate (the floor)")
    ] = 10.0,
    telemetry_rate: Annotated[float, typer.Option(help="Telemetry reports/s per thermostat")] = 0.1,
) -> None:
    """POST-to-converged command latency through the whole stack, against GET /healthz (temporary servers)."""
    from hearth.bench.roundtrip import main as roundtrip_main

    roundtrip_main(
        devices=devices,
        rates=rate,
        duration_s=duration,
        floor_s=floor_duration,
        telemetry_rate=telemetry_rate,
    )


@bench_app.command("gateway")
def bench_gateway(
    devices: Annotated[int, typer.Option(help="Thermostats whose reports go through the gateway")] = 1000,
    reports: Annotated[int, typer.Option(help="State reports published (floor and gateway each)")] = 100_000,
    connections: Annotated[
        int, typer.Option(help="Devices connected at once, each with its own credentials (0: skip)")
    ] = 10_000,
    roundtrip: Annotated[bool, typer.Option(help="Also the command round trip over MQTT at 200/s")] = True,
    duration: Annotated[float, typer.Option(help="Seconds of commands for the round trip")] = 20.0,
    profile: Annotated[
        Path | None, typer.Option(help="py-spy profile of the gateway while it runs (collapsed stacks)")
    ] = None,
) -> None:
    """Device gateway: reports/s into the journal against gmqtt's own floor, connections held, round trip."""
    from hearth.bench.gateway import main as gateway_main

    gateway_main(
        devices=devices,
        reports=reports,
        connections=connections,
        roundtrip=roundtrip,
        duration_s=duration,
        profile=profile,
    )


@bench_app.command("memory")
def bench_memory(
    size: Annotated[list[int] | None, typer.Option(help="Twins in the table (repeat for more sizes)")] = None,
    built: Annotated[int, typer.Option(help="Twins made by the actor's code; the rest are copies")] = 100_000,
    worker_devices: Annotated[
        int, typer.Option(help="Devices registered and reported to a real worker (0: none)")
    ] = 1_000_000,
) -> None:
    """Memory per twin: the twins table in one process (100k and 1M twins) and a real worker."""
    from hearth.bench.memory import main as memory_main

    memory_main(sizes=size, built=built, worker_devices=worker_devices)


@bench_app.command("push")
def bench_push(
    clients: Annotated[int, typer.Option(help="Websocket subscribers of the home")] = 1000,
    devices: Annotated[int, typer.Option(help="Thermostats of the home")] = 10,
    rate: Annotated[float, typer.Option(help="State reports per second")] = 5.0,
    duration: Annotated[float, typer.Option(help="Seconds of reports")] = 20.0,
    compression: Annotated[bool, typer.Option(help="Offer permessage-deflate, as browsers do")] = True,
) -> None:
    """Report-to-websocket latency at each subscriber, against Redis PUBLISH to as many (temp. servers)."""
    from hearth.bench.push import main as push_main

    push_main(clients=clients, devices=devices, rate=rate, duration_s=duration, compression=compression)


@bench_app.command("campaign")
def bench_campaign(
    devices: Annotated[int, typer.Option(help="Simulated locks in the campaign")] = 1000,
    waves: Annotated[str, typer.Option(help="Cumulative percents, comma-separated")] = "1,10,50,100",
    soak: Annotated[float, typer.Option(help="Soak seconds per wave")] = 5.0,
    install: Annotated[float, typer.Option(help="Simulated install seconds per device")] = 1.0,
) -> None:
    """A firmware campaign: the platform's overhead per wave, and gate -> abort (temporary servers)."""
    from hearth.bench.campaign import main as campaign_main

    campaign_main(devices=devices, waves=[float(w) for w in waves.split(",")], soak_s=soak, install_s=install)


@bench_app.command("reads")
def bench_reads(
    devices: Annotated[int, typer.Option(help="Simulated thermostats whose twins are read")] = 1000,
    concurrency: Annotated[int, typer.Option(help="Requests in flight")] = 8,
    duration: Annotated[float, typer.Option(help="Seconds of reads")] = 20.0,
    floor_duration: Annotated[float, typer.Option(help="Seconds of GET /healthz (the floor)")] = 10.0,
    telemetry_rate: Annotated[float, typer.Option(help="Telemetry reports/s per thermostat")] = 0.1,
) -> None:
    """Twin reads per second and their latency, against GET /healthz of the same API (temporary servers)."""
    from hearth.bench.reads import main as reads_main

    reads_main(
        devices=devices,
        concurrency=concurrency,
        duration_s=duration,
        floor_s=floor_duration,
        telemetry_rate=telemetry_rate,
    )


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
    from hearth_read_models.rebuild import RebuildFailed
    from hearth_read_models.rebuild import rebuild as run_rebuild
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
    from hearth_read_models.rebuild import verify as run_verify
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
