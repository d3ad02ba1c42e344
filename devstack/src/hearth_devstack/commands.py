"""``hearth up``, ``hearth down`` and ``hearth status``: the local stack's commands, added to
the ``hearth`` CLI by ``register`` (this package's ``hearth.commands`` entry point).

``up`` runs the stack in the foreground under the supervisor (``hearth_devstack.supervision.supervisor``):
a part that dies is restarted, one in a crash loop is stopped alone; only Ctrl-C or ``hearth down`` stops
it all. Before starting it clears what an unclean stop left (``hearth_devstack.supervision.stale``).
``status`` reads the status file ``up`` keeps (``hearth_devstack.supervision.status``), with what each
part's topic followers read at its last start (their restart reports): two tables, or ``--json`` for
scripts.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from hearth.support.stack_dir import DEFAULT_HOME, Home
from hearth_device_actor.adapters.serving import Serving, read_serving, serving_file
from hearth_devstack.local import LocalStack, StackPorts, StartupError
from hearth_devstack.supervision.stale import UP_PID, running_supervisor, same_process, stop_orphans
from hearth_devstack.supervision.status import (
    FollowerReport,
    StackStatus,
    read_follower_reports,
    read_status,
    status_path,
)
from hearth_devstack.supervision.supervisor import RestartPolicy
from hearth_shared.schema.auth import create_token

console = Console(stderr=True, soft_wrap=True)  # tokens and URLs stay whole, to copy
DEMO_HOME = "demo"
NOT_RUNNING = 3  # `hearth status` exit code when no stack runs (as `systemctl status` does)


def up(
    home: Home = DEFAULT_HOME,
    kafka_port: int = 9092,
    kafka_controller_port: int = 9093,
    postgres_port: int = 5432,
    redis_port: int = 6379,
    command_api_port: int = 8000,
    query_api_port: int = 8001,
    mqtt_port: Annotated[int, typer.Option(help="MQTT listener for devices")] = 1883,
    mqtts_port: Annotated[int, typer.Option(help="MQTT over TLS listener for devices")] = 8883,
    mqtt_platform_port: Annotated[
        int, typer.Option(help="MQTT listener for Hearth's own components (gateways, simulator)")
    ] = 1884,
    mqtt_certfile: Annotated[
        Path | None, typer.Option(help="PEM certificate for MQTT over TLS (default: one made locally)")
    ] = None,
    mqtt_keyfile: Annotated[Path | None, typer.Option(help="PEM key of --mqtt-certfile")] = None,
    simulate: Annotated[bool, typer.Option(help="Run the fleet simulator with a demo home")] = True,
    analytics: Annotated[bool, typer.Option(help="Run the Spark streaming job (rollups, training)")] = True,
    start_timeout_factor: Annotated[
        float, typer.Option(help="Multiply every part's start timeout (a slow or busy machine)")
    ] = 1.0,
    brokers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Kafka nodes: 1, or 3 (or more) for a KRaft cluster whose topics get a replica on every "
            "node (min.insync.replicas 2); node i (from 0) listens on --kafka-port + 2i and "
            "--kafka-controller-port + 2i",
        ),
    ] = 1,
    mqtt_brokers: Annotated[
        int,
        typer.Option(
            min=1,
            help="MQTT broker shards, a Mosquitto each with its own broker-access follower and device "
            "gateway; a new device is assigned one at registration. Shard i (from 0) listens on "
            "--mqtt-port + 2i, --mqtt-platform-port + 2i and --mqtts-port + i",
        ),
    ] = 1,
    device_actors: Annotated[
        int,
        typer.Option(
            min=1,
            help="Device-actor workers (parts device-actor, device-actor.2, ...): they share the inbox's "
            "partitions, so more than the partition count (12) leaves the rest idle",
        ),
    ] = 1,
    query_apis: Annotated[
        int,
        typer.Option(
            min=1,
            help="Query-API processes (query-api, query-api.2, ...); the n-th on --query-api-port + n - 1",
        ),
    ] = 1,
) -> None:
    """Run the whole local stack in the foreground until Ctrl-C (or `hearth down`); parts that die are
    restarted with backoff (see `hearth status`)."""
    ports = StackPorts(
        kafka_port, kafka_controller_port, postgres_port, redis_port, command_api_port, query_api_port
    )
    ports.mqtt, ports.mqtts, ports.mqtt_platform = mqtt_port, mqtts_port, mqtt_platform_port
    try:
        stack = LocalStack(
            home=home,
            ports=ports,
            brokers=brokers,
            mqtt_brokers=mqtt_brokers,
            device_actors=device_actors,
            query_apis=query_apis,
            simulate=simulate,
            analytics=analytics,
            policy=RestartPolicy(start_timeout_factor=start_timeout_factor),
            report=lambda m: console.print(f"[dim]{m}[/]", highlight=False),
            mqtt_certfile=mqtt_certfile,
            mqtt_keyfile=mqtt_keyfile,
        )
    except StartupError as exc:  # e.g. --brokers 2, or cluster ports that overlap
        console.print(f"[red bold]Hearth could not start:[/] {exc}")
        raise typer.Exit(1) from exc
    if (pid := running_supervisor(stack.home)) is not None:
        console.print(f"[red]A stack is already running from {stack.home} (pid {pid}).[/]")
        raise typer.Exit(1)
    stop_orphans(stack.home, report=lambda m: console.print(f"[yellow]{m}[/]"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stack.home.mkdir(parents=True, exist_ok=True)
    pid_file = stack.home / UP_PID
    pid_file.write_text(str(os.getpid()))  # before the first child: an unclean stop is recognised
    try:
        try:
            stack.start()
        except StartupError as exc:
            console.print(f"[red bold]Hearth could not start:[/] {exc}")
            raise typer.Exit(1) from exc
        secret = stack.settings.token_secret
        admin, demo = create_token(secret, admin=True), create_token(secret, home_id=DEMO_HOME)
        if simulate and not stop.is_set():
            from hearth_simulator.registration import demo_counts, register_fleet

            api = f"http://127.0.0.1:{ports.command_api}"  # the demo home: a few devices of every type
            asyncio.run(register_fleet(api, admin, DEMO_HOME, demo_counts()))
        _print_started(stack, admin, demo)
        stack.supervise(stop)
    finally:
        console.print("[bold]Stopping Hearth...[/]")
        stack.stop()
        pid_file.unlink(missing_ok=True)
        console.print("[green]Stopped.[/]")


def _print_started(stack: LocalStack, admin: str, demo: str) -> None:
    table = Table(title="Hearth is running", show_lines=False)
    for column in ("part", "where", "log"):
        table.add_column(column)
    for part in stack.parts:
        table.add_row(part.name, part.url or "-", part.log)
    console.print(table)
    query = f"http://127.0.0.1:{stack.ports.query_api}"
    # The page trades this single-use, 15-minute link token for a page token it renews (POST /v1/session).
    link = create_token(stack.settings.token_secret, home_id=DEMO_HOME, kind="link")
    console.print(f"Live home page:  [bold]{query}/?token={link}[/]  (the link works once, for 15 minutes;")
    console.print(f"                 another: hearth token create --home {DEMO_HOME} --link)")
    console.print(f"Command API:     http://127.0.0.1:{stack.ports.command_api}/docs")
    console.print(f"Query API:       {query}/docs")
    for i, broker in enumerate(stack.mosquittos):
        shard = f" shard {i}" if len(stack.mosquittos) > 1 else ""
        console.print(f"MQTT{shard} (devices):  {broker.url}, TLS {broker.tls_url} (CA file {broker.cafile})")
    console.print(f"Admin token:     [bold]{admin}[/]  (30 days; `hearth token revoke ID` ends one)")
    console.print(f"Demo home token: [bold]{demo}[/]  (home '{DEMO_HOME}', 90 days)")
    console.print("Parts that die are restarted (see `hearth status`). Stop with Ctrl-C or `hearth down`.")


def down(home: Home = DEFAULT_HOME, timeout_s: float = 60.0) -> None:
    """Stop a stack started by `hearth up` (it shuts every part down cleanly)."""
    home = home.resolve()
    pid = running_supervisor(home)
    if pid is None:
        stopped = stop_orphans(home, report=lambda m: console.print(f"[yellow]{m}[/]"))
        console.print("Stopped what an unclean stop left." if stopped else "No running stack found.")
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while running_supervisor(home) == pid and time.monotonic() < deadline:
        time.sleep(0.2)
    if running_supervisor(home) == pid:
        console.print(f"[red]The stack (pid {pid}) did not stop within {timeout_s:.0f} s.[/]")
        raise typer.Exit(1)
    console.print("[green]Stopped.[/]")


def status(
    home: Home = DEFAULT_HOME,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout, for scripts")] = False,
) -> None:
    """Each part of the local stack: state, health, pid, restarts, last exit, and what its followers read
    at its last start (snapshot age, records replayed). Exit code 0: running and every part healthy; 1:
    running, some part not healthy; 3: no stack running."""
    home = home.resolve()
    current = read_status(home)
    running = current is not None and _supervisor_alive(home, current)
    if as_json:
        sys.stdout.write(json.dumps(status_document(home, current, running), indent=1) + "\n")
    elif current is None:
        console.print(f"No stack has run from {home} (no {status_path(home).name}).")
    else:
        _print_status(home, current, running)
    if not running:
        raise typer.Exit(NOT_RUNNING)
    assert current is not None
    if any(p.health != "healthy" for p in current.parts):
        raise typer.Exit(1)


def status_document(home: Path, current: StackStatus | None, running: bool) -> dict[str, Any]:
    """``hearth status --json``: the status file, each part with its followers' restart reports."""
    if current is None:
        return {"running": running, "parts": []}
    document = current.to_json()
    inbox = read_serving(serving_file(home / "data" / "device-actor"))
    if inbox is not None:
        document["inbox"] = {
            "lag": inbox.lag,
            "coalesced_reports": inbox.coalesced_reports,
            "late_reports": inbox.late_reports,
            "unknown_device_requests": inbox.unknown_device_requests,
        }
    for part, status in zip(document["parts"], current.parts, strict=True):
        part["followers"] = [
            {k: v for k, v in asdict(report).items() if k != "part"}
            for report in read_follower_reports(status)
        ]
    return {"running": running, **document}


def _supervisor_alive(home: Path, current: StackStatus) -> bool:
    return same_process(current.supervisor_pid, status_path(home).stat().st_mtime) is not None


def _print_status(home: Path, current: StackStatus, running: bool) -> None:
    when = datetime.fromtimestamp(current.updated_at).strftime("%Y-%m-%d %H:%M:%S")
    title = (
        f"Hearth (supervisor pid {current.supervisor_pid}, updated {when})"
        if running
        else f"Hearth is not running (last status, {when}, from pid {current.supervisor_pid})"
    )
    table = Table(title=title)
    for column in ("part", "state", "health", "pid", "restarts", "last exit", "ready in", "note"):
        table.add_column(column, overflow="fold")
    colours = {"healthy": "green", "unhealthy": "yellow", "starting": "cyan", "down": "red"}
    for p in current.parts:
        health = f"[{colours.get(p.health, 'white')}]{p.health}[/]"
        ready = f"{p.healthy_after_s:.1f} s" if p.healthy_after_s is not None else "-"
        pid = str(p.pid) if p.pid else "-"
        table.add_row(p.name, p.state, health, pid, str(p.restarts), p.last_exit or "-", ready, p.note)
    out = Console(width=None if sys.stdout.isatty() else 160)  # piped: no wrapping at 80
    out.print(table)
    reports = [report for p in current.parts for report in read_follower_reports(p)]
    if reports:
        out.print(followers_table(reports))
    inbox = read_serving(serving_file(home / "data" / "device-actor"))
    if inbox is not None and running:
        out.print(inbox_table(inbox))


def inbox_table(state: Serving) -> Table:
    """The device actor's inbox: how far behind each lane is, and how many reports overload coalesced."""
    table = Table(title="The device actor's inbox (its serving file)")
    for column in ("lane", "behind (records)"):
        table.add_column(column, justify="right" if column != "lane" else "left")
    for lane, lag in state.lag.items():
        table.add_row(lane, f"{lag:,}")
    table.caption = (
        f"since the worker started: {state.coalesced_reports:,} state reports coalesced under overload, "
        f"{state.late_reports:,} were overtaken whole by newer ones or redelivered (no fact), "
        f"{state.unknown_device_requests:,} requests were for devices not registered (no fact)"
    )
    return table


def followers_table(reports: list[FollowerReport]) -> Table:
    """One row per topic follower: what its part's last start read, and how old its snapshot is now."""
    table = Table(title="What each part read at its last start (its topic followers' restart reports)")
    for column in ("part", "follower", "started from", "snapshot age", "replayed", "gap", "caught up in"):
        table.add_column(
            column, overflow="fold", justify="right" if column in ("replayed", "gap") else "left"
        )
    shown = ""
    for r in reports:
        started = r.started_from if r.started_from == "snapshot" else f"[yellow]{r.started_from}[/]"
        gap = "-" if r.gap is None else (f"[red]{r.gap:,}[/]" if r.gap else "0")
        table.add_row(
            r.part if r.part != shown else "",
            r.follower,
            started,
            "-" if r.replayed is None else _age(r.snapshot_age_s),  # "-": the report is unreadable
            "-" if r.replayed is None else f"{r.replayed:,}",
            gap,
            "-" if r.caught_up_s is None else f"{r.caught_up_s:.1f} s",
        )
        shown = r.part
    return table


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "none yet"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def register(app: typer.Typer) -> None:
    """Add ``up``, ``down`` and ``status`` to the ``hearth`` CLI (entry point ``hearth.commands``)."""
    app.command("up")(up)
    app.command("down")(down)
    app.command("status")(status)
