"""kill -9 each part of a supervised stack in turn under steady commands: the supervisor brings it back,
and no command that got a 202 is lost, doubled or stuck; the journal holds each device's facts once, in
versions 1..N; the live views equal a replay (verify). Recovery times go to .hearth/chaos.json.

Commands carry an Idempotency-Key; a request that failed during a kill (no answer, 5xx) is sent again
with the same key, as a client would. The devices are real MQTT devices (the hearth_device SDK, with the
credentials their registration issued: ack, then report what was asked), so the broker, the broker-access
follower and the device gateway are killed too. Mosquitto saves its sessions every 30 s
(``autosave_interval``), and its kill waits for a save made after the devices last subscribed, so the
sessions it restores hold every device's subscription; what it had accepted and not yet delivered at the
moment it died is lost, and a command that loses its ack or report that way expires (a terminal status,
which the test accepts; the probe command sent after each recovery must converge). The broker is not the
last part killed: the commands it loses expire (30 s) while the last kills run, not after them, where the
test waited for them alone (28 s of its 93).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hearth_device import DeviceConnection
from hearth_devstack.local import LocalStack
from hearth_devstack.workload.command_ledger import Ledger, Outcome, all_ended, status_of, steady, submit
from hearth_devstack.workload.journal_check import journal_faults, read_journal
from hearth_read_models.rebuild.run import verify
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.store.db import connect
from hearth_shared.adapters.http_calls import GatedClient
from hearth_shared.schema.auth import create_token
from hearth_shared.schema.events import TERMINAL_STATUSES
from tests.support.mqtt_devices import connected
from tests.support.part_kills import killed_and_back
from tests.support.waiting import eventually, poll_until

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(1500)]

KILLED = [
    "device-actor",
    "device-gateway",
    "projector",
    "command-api",
    "query-api",
    "mosquitto",  # once it has saved the sessions (``sessions_saved``); what it loses expires meanwhile
    "redis",
    "postgres",
    "broker-access",
]
MQTT_PARTS = {"device-gateway", "broker-access", "mosquitto"}
DEVICES = 6
RATE = 4.0  # commands per second, spread over the devices
HEARTBEAT_S = 5.0
SETTLE_S = 1.5  # steady commands between one part's recovery and the next kill
# Each run's recovery times, beside the suite's durations (untracked: a test run leaves the checkout clean;
# bench/results/chaos.json is the copy docs/BENCHMARKS.md was written from).
RESULTS = Path(__file__).resolve().parents[2] / ".hearth" / "chaos.json"
INITIAL = {"ambient_c": 19.0, "hvac_mode": "heat", "hvac_action": "idle", "target_c": 19.0}


async def play(device: DeviceConnection) -> None:
    """The device: acknowledge each command it gets and report the target it was asked for."""
    while True:
        dispatched = await device.next_command(timeout_s=3600)
        await device.ack(dispatched)
        await device.report({"target_c": dispatched.params["target_c"], "hvac_action": "heating"})


async def heartbeat(device: DeviceConnection) -> None:
    """A reading every few seconds, as a real thermostat sends: a device silent for the actor's offline
    limit (60 s) is offline, and its commands are held until they expire."""
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        await device.report({"ambient_c": INITIAL["ambient_c"]})


async def devices_back(connections: list[DeviceConnection], timeout_s: float = 60) -> None:
    """Until every device is connected again (they reconnect by themselves, with backoff) and the broker
    has granted the subscriptions each renews on reconnecting: a broker that lost a session (killed
    before it saved it) drops a command published before then, as it has no subscriber yet."""
    await eventually(
        lambda: all(d.link.client.is_connected for d in connections),
        "every device connected again",
        timeout_s=timeout_s,
        every_s=0.1,
    )
    for device in connections:
        await device.link.subscribed(timeout_s)


async def sessions_saved(stack: LocalStack, since: float) -> None:
    """Until Mosquitto has saved its sessions (every ``autosave_interval``, 30 s) after ``since`` (wall
    time): killed before that, it would restore no subscription made since its last save."""
    saved = stack.mosquitto.persistence_file
    await eventually(
        lambda: saved.exists() and saved.stat().st_mtime > since,
        "Mosquitto's sessions saved since the devices last subscribed",
        timeout_s=45,
        every_s=0.5,
    )


async def probe_story(stack: LocalStack, command_id: str, device: DeviceConnection) -> str:
    """What the journal says of a probe command (its facts) and of its device (its last four presence
    facts), and the state of the device's link: enough to tell a command never dispatched from one
    dispatched and never acknowledged."""
    events = [e for e in await read_journal(stack.settings) if e.device_id == device.username]
    about = [f"{e.recorded_at:%H:%M:%S.%f} {e.type}" for e in events if str(e.correlation_id) == command_id]
    presence = [
        f"{e.recorded_at:%H:%M:%S.%f} {e.type}" for e in events if "online" in e.type or "offline" in e.type
    ]
    link = device.link.state
    return f"the command's facts: {about}; the device's presence: {presence[-4:]}; its link: {link}"


async def kill_and_recover(
    stack: LocalStack,
    name: str,
    api: GatedClient,
    query: GatedClient,
    ledger: Ledger,
    probe: str,
    connections: list[DeviceConnection],
) -> dict[str, Any]:
    """kill -9 the part's process; seconds to healthy again (and, for an MQTT part, until every device
    is connected again), then to a new command converging."""
    kill = await killed_and_back(stack, name)
    healthy_s = time.monotonic() - kill.at
    if name in MQTT_PARTS:
        await devices_back(connections)
    command_id = await submit(api, ledger, probe, 20.0 + len(ledger.accepted) % 10 * 0.5)
    status = await poll_until(
        lambda: status_of([query], command_id),
        lambda status: status in TERMINAL_STATUSES,
        f"probe command {command_id} to end",
        timeout_s=240 - (time.monotonic() - kill.at),
    )
    if status != "converged":
        story = await probe_story(stack, command_id, next(d for d in connections if d.username == probe))
        raise AssertionError(f"probe command {command_id} after the {name} kill ended {status}: {story}")
    converged_s = time.monotonic() - kill.at
    return {
        "part": name,
        "pid": kill.pid,
        "killed_at": kill.wall,
        "healthy_s": round(healthy_s, 2),
        "converged_s": round(converged_s, 2),
    }


async def test_killing_each_part_loses_doubles_and_strands_nothing(supervised_stack: LocalStack) -> None:
    stack = supervised_stack
    settings = stack.settings
    command_api, query_api = (
        f"http://127.0.0.1:{p}" for p in (stack.ports.command_api, stack.ports.query_api)
    )
    headers = {"Authorization": f"Bearer {create_token(settings.token_secret, admin=True)}"}
    ledger, recoveries = Ledger(), []
    connections: list[DeviceConnection] = []
    async with (
        GatedClient(base_url=command_api, headers=headers) as api,
        GatedClient(base_url=query_api, headers=headers) as query,
    ):
        devices = [f"chaos-thermostat-{i}" for i in range(DEVICES + 1)]
        for device_id in devices:
            body = {"device_id": device_id, "home_id": "chaos", "type": "thermostat", "name": device_id}
            response = await api.post("/v1/devices", json=body)
            assert response.status_code == 201, response.text
            password = response.json()["credentials"]["password"]
            # Back soon after a broker restart: at most 2 s between attempts.
            device = await connected(stack.mosquitto, device_id, password, 60.0, backoff_max_s=2.0)
            connections.append(device)
            await device.report(INITIAL)
        players = [asyncio.create_task(play(d)) for d in connections]
        players += [asyncio.create_task(heartbeat(d)) for d in connections]
        stop = asyncio.Event()
        driver = asyncio.create_task(steady(api, ledger, devices[1:], RATE, stop))
        probe = devices[0]  # the recovery probe's own device: its command is never superseded by load
        started, subscribed = time.monotonic(), time.time()
        for name in KILLED:
            await asyncio.sleep(SETTLE_S)
            if name == "mosquitto":
                await sessions_saved(stack, subscribed)
            recoveries.append(await kill_and_recover(stack, name, api, query, ledger, probe, connections))
            print(f"chaos: {recoveries[-1]}", flush=True)
            if name in MQTT_PARTS:  # the devices are connected and subscribed again (``devices_back``)
                subscribed = time.time()
        await asyncio.sleep(SETTLE_S)
        stop.set()
        await driver
        load_s = time.monotonic() - started

        statuses: dict[str, str | None] = {}
        # The default 30 s expiry ends any command left behind; one still open after 90 s is counted below.
        with contextlib.suppress(AssertionError):
            await eventually(
                lambda: all_ended([query], ledger, statuses),
                "every accepted command to end",
                timeout_s=90,
                every_s=1,
            )
        for player in players:
            player.cancel()
        for device in connections:
            await device.close(offline=False)

    read_models = ReadModelSettings(stack=settings)
    async with await connect(settings.postgres_dsn, read_models.schema_name) as conn:
        rows = await (await conn.execute("SELECT command_id::text FROM commands")).fetchall()
        requested = await (
            await conn.execute(
                "SELECT correlation_id::text, count(*) FROM device_events"
                " WHERE type = 'command.requested' GROUP BY 1 HAVING count(*) > 1"
            )
        ).fetchall()
    in_views = Counter(r[0] for r in rows)
    journal = journal_faults(await read_journal(settings))
    # doubled in the views (a command's row twice, or requested twice there) or in the journal
    twice = {c for c in ledger.accepted if in_views[c] > 1} | {r[0] for r in requested}
    outcome = Outcome.of(ledger, statuses, twice | set(journal["doubled_commands"]))
    verified = await verify(read_models)
    differences = sum(verified.counts.values())

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average": os.getloadavg()[0],
        "commands_per_s": RATE,
        "load_s": round(load_s, 1),
        "commands": len(ledger.accepted),
        "retried_requests": ledger.retried,
        "statuses": Counter(statuses.values()),
        **outcome.counts,
        "journal": journal,
        "verify_differences": differences,
        "recovery": recoveries,
    }, indent=1) + "\n")  # fmt: skip

    assert outcome == Outcome([], [], []), outcome
    faults = {k: journal[k] for k in ("devices_out_of_order", "repeated_event_ids", "doubled_requests")}
    assert faults == {"devices_out_of_order": [], "repeated_event_ids": 0, "doubled_requests": 0}, journal
    assert differences == 0, verified.counts
