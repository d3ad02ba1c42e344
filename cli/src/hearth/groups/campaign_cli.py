"""``hearth campaign start|status|abort``: firmware campaigns from the command line, over the command API
with an admin token (``hearth.support.admin_http``).

``start`` prints the campaign id on stdout (and nothing else), then with ``--watch`` (the default on a
terminal) shows each wave's progress live on stderr until the campaign ends; ``status ID`` shows it once
(``--watch`` to follow), ``status`` alone lists the campaigns.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.table import Table

from hearth.support.admin_http import Api, admin_client, checked
from hearth.support.stack_dir import DEFAULT_HOME, Home

campaign_app = typer.Typer(help="Firmware campaigns: start, follow, abort (admin).", no_args_is_help=True)
console = Console(stderr=True, soft_wrap=True)

ENDED = ("succeeded", "failed", "timed_out", "rolled_back")


@campaign_app.command("start")
def campaign_start(
    device_type: Annotated[str, typer.Option("--type", help="The device type the firmware is for")],
    version: Annotated[str, typer.Option(help="The firmware version, e.g. 2.4.1")],
    url: Annotated[str, typer.Option(help="Where devices download the image")],
    sha256: Annotated[str, typer.Option(help="The image's SHA-256")],
    homes: Annotated[
        list[str] | None, typer.Option("--home", help="Target every device of these homes")
    ] = None,
    devices: Annotated[list[str] | None, typer.Option("--device", help="Or target these devices")] = None,
    waves: Annotated[str, typer.Option(help="Cumulative percents")] = "1,10,100",
    soak: Annotated[float, typer.Option(help="Seconds to watch each wave before the next")] = 300.0,
    max_failed_pct: Annotated[float, typer.Option(help="Abort over this share of failed installs")] = 5.0,
    max_offline_pct: Annotated[float, typer.Option(help="Abort over this share gone offline")] = 5.0,
    max_anomaly_ratio: Annotated[float, typer.Option(help="Abort over this anomaly rate ratio")] = 3.0,
    job_timeout: Annotated[float, typer.Option(help="Seconds an install may take")] = 300.0,
    watch: Annotated[bool | None, typer.Option(help="Follow it live (default: on a terminal)")] = None,
    api: Api = "http://127.0.0.1:8000",
    home: Home = DEFAULT_HOME,
) -> None:
    """Start a firmware campaign; prints its id."""
    target = {"device_ids": devices} if devices else {"home_ids": homes or []}
    body = {
        "device_type": device_type,
        "version": version,
        "url": url,
        "sha256": sha256,
        "target": target,
        "waves": [float(w) for w in waves.split(",") if w.strip()],
        "soak_s": soak,
        "abort": {
            "max_failed_pct": max_failed_pct,
            "max_offline_pct": max_offline_pct,
            "max_anomaly_ratio": max_anomaly_ratio,
        },
        "job_timeout_s": job_timeout,
    }
    with admin_client(api, home) as client:
        campaign_id = checked(client.post("/v1/campaigns", json=body))["campaign_id"]
        print(campaign_id)
        if watch if watch is not None else sys.stderr.isatty():
            follow(client, campaign_id)


@campaign_app.command("status")
def campaign_status(
    campaign_id: Annotated[str | None, typer.Argument(help="The campaign; none: list them all")] = None,
    watch: Annotated[bool, typer.Option(help="Follow it live until it ends")] = False,
    api: Api = "http://127.0.0.1:8000",
    home: Home = DEFAULT_HOME,
) -> None:
    """A campaign's waves and jobs (or every campaign)."""
    with admin_client(api, home) as client:
        if campaign_id is None:
            table = Table("campaign", "type", "version", "status", "wave", "jobs")
            for c in checked(client.get("/v1/campaigns")):
                jobs = ", ".join(f"{k} {v}" for k, v in c["jobs"].items())
                table.add_row(
                    c["campaign_id"],
                    c["device_type"],
                    c["version"],
                    c["status"],
                    str(c["current_wave"]),
                    jobs,
                )
            console.print(table)
        elif watch:
            follow(client, campaign_id)
        else:
            console.print(summary(checked(client.get(f"/v1/campaigns/{campaign_id}"))))


@campaign_app.command("abort")
def campaign_abort(
    campaign_id: Annotated[str, typer.Argument(help="The campaign")],
    reason: Annotated[str, typer.Option(help="Recorded with the abort")] = "requested",
    api: Api = "http://127.0.0.1:8000",
    home: Home = DEFAULT_HOME,
) -> None:
    """Abort a campaign: no further waves, the current wave's devices are rolled back."""
    with admin_client(api, home) as client:
        checked(client.post(f"/v1/campaigns/{campaign_id}/abort", json={"reason": reason}))
        console.print(f"campaign {campaign_id}: abort requested")


def summary(campaign: dict[str, Any]) -> Table:
    table = Table(title=f"campaign {campaign['campaign_id']}: {campaign['status']} ({campaign['version']})")
    for column in ("wave", "percent", "size", "state", "jobs"):
        table.add_column(column)
    for w in campaign["waves"]:
        jobs = ", ".join(f"{k} {v}" for k, v in w["jobs"].items())
        table.add_row(str(w["wave"]), f"{w['percent']:g}", str(w["size"]), w["state"], jobs)
    if campaign.get("abort"):
        table.caption = f"aborted: {campaign['abort']['reason']}"
    return table


def follow(client: httpx.Client, campaign_id: str, every_s: float = 1.0) -> dict[str, Any]:
    """Show each wave's progress (jobs ended of its size) live until the campaign ends."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f}"),
        TextColumn("{task.fields[state]}"),
    )
    with Progress(*columns, console=console) as progress:
        tasks: dict[int, TaskID] = {}
        while True:
            campaign = checked(client.get(f"/v1/campaigns/{campaign_id}"))
            for w in campaign["waves"]:
                done = sum(w["jobs"].get(s, 0) for s in ENDED)
                state = f"{w['state']} " + ", ".join(f"{k} {v}" for k, v in w["jobs"].items())
                if w["wave"] not in tasks:
                    label = f"wave {w['wave']} ({w['percent']:g} %)"
                    tasks[w["wave"]] = progress.add_task(label, total=max(w["size"], 1), state=state)
                progress.update(tasks[w["wave"]], completed=done, state=state)
            if campaign["status"] != "running":
                break
            time.sleep(every_s)
    console.print(summary(campaign))
    return dict(campaign)
