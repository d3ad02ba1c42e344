"""``hearth device connect DEVICE_ID --password ...``: be a device from a terminal, over MQTT.

It connects with the device's credential (the one ``POST /v1/devices`` answered) through the device SDK
(``hearth_device``, the ``device`` extra: ``hearth.support.needs``), says ``online`` (its will says
``offline``), prints every command and error Hearth sends, and reads what the person types:

* a JSON object, e.g. ``{"lock_state": "unlocked"}``: a state report (seq counts up by itself);
* ``ack`` / ``ack failed REASON``: acknowledge the last command received;
* ``quit`` (or end of input): say ``offline`` and disconnect.

Exit code 5 when the broker refuses the credential (as ``mosquitto_pub`` does).

``hearth device quarantine DEVICE_ID --reason ...`` and ``hearth device release DEVICE_ID`` put a device in
quarantine (it refuses every non-admin command with ``quarantined``) and take it out, through the command
API with an admin token (``hearth.support.admin_http``).

``hearth device move-shard DEVICE_ID --to SHARD`` moves a device to another MQTT broker shard (admin):
``device.shard_moved``, then new credentials naming the new broker, printed once as JSON (as the
registration answered its first ones); the old secret stops working and the old broker drops the device.
``hearth device connect --url`` takes the ``mqtt_url`` of those credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hearth.support.admin_http import Api, admin_client, checked, console
from hearth.support.needs import needs
from hearth.support.stack_dir import DEFAULT_HOME, Home

if TYPE_CHECKING:
    from hearth_device import Command, DeviceConnection

device_app = typer.Typer(
    help="Be a device over MQTT with its credential; quarantine or release one (admin).", no_args_is_help=True
)

NOT_AUTHORISED = 5
HELP = 'Type a JSON state report like {"lock_state": "locked"}, "ack", "ack failed REASON", or "quit".'


@device_app.command("connect")
def connect(
    device_id: Annotated[str, typer.Argument(help="The device id (its MQTT username)")],
    password: Annotated[str, typer.Option(help="The device's secret, from its registration or rotation")],
    host: str = "127.0.0.1",
    port: Annotated[int, typer.Option(help="1883, or the TLS port (8883) with --cafile")] = 1883,
    cafile: Annotated[
        Path | None, typer.Option(help="Use TLS, trusting this CA (.hearth/data/mosquitto/tls/server.crt)")
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(help="The credentials' mqtt_url (its broker shard), instead of --host and --port"),
    ] = None,
) -> None:
    """Connect as DEVICE_ID, print what Hearth sends it, and send what you type."""
    with needs("device connect"):
        from hearth_device import DeviceConnection, tls_context

    if url is not None:
        cafile_name = str(cafile) if cafile else None
        device = DeviceConnection.at_url(url, username=device_id, password=password, cafile=cafile_name)
    else:
        tls = tls_context(str(cafile)) if cafile else None
        device = DeviceConnection(username=device_id, password=password, host=host, port=port, tls=tls)
    raise typer.Exit(asyncio.run(_session(device)))


async def _session(device: DeviceConnection) -> int:
    try:
        await device.connect()
    except Exception as exc:  # gmqtt's MQTTConnectError carries the CONNACK code
        print(f"the broker refused {device.username}: {exc}", file=sys.stderr)
        return NOT_AUTHORISED
    try:  # connected, and subscribed to its commands and errors, before saying so
        await asyncio.wait_for(device.link.connected.wait(), 30)
        await device.link.subscribed()
    except TimeoutError:
        print(f"{device.username}: no answer from the broker within 30 s", file=sys.stderr)
        await device.close(offline=False)
        return 1
    print(f"connected as {device.username} (online). {HELP}", flush=True)
    last: list[Command] = []
    printer = asyncio.create_task(_print_incoming(device, last))
    try:
        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line or line.strip() == "quit":
                return 0
            await _handle(device, line.strip(), last)
    finally:
        printer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await printer
        await device.close()
        print(f"{device.username} disconnected (offline).", flush=True)


async def _handle(device: DeviceConnection, line: str, last: list[Command]) -> None:
    if not line:
        return
    if line.startswith("ack"):
        if not last:
            print("no command to acknowledge yet", flush=True)
            return
        words = line.split(maxsplit=2)
        ok = len(words) < 2 or words[1] != "failed"
        await device.ack(last[-1], ok=ok, reason=words[2] if not ok and len(words) > 2 else "")
        print(f"acknowledged {last[-1].command_id}: {'ok' if ok else 'failed'}", flush=True)
        return
    try:
        state = json.loads(line)
    except json.JSONDecodeError as exc:
        print(f"not JSON ({exc}). {HELP}", flush=True)
        return
    if not isinstance(state, dict):
        print(f"a report is a JSON object. {HELP}", flush=True)
        return
    seq = await device.report(state)
    print(f"reported seq {seq}: {json.dumps(state)}", flush=True)


async def _print_incoming(device: DeviceConnection, last: list[Command]) -> None:
    async def commands() -> None:
        while True:
            command = await device.commands.get()
            last.append(command)
            params = json.dumps(command.params)
            print(f"command {command.command_id}: {command.name} {params} (expires {command.expires_at})")
            sys.stdout.flush()

    async def errors() -> None:
        while True:
            error = await device.errors.get()
            print(f"error from Hearth on {error.topic}: {error.error} ({error.reason})", flush=True)

    await asyncio.gather(commands(), errors())


@device_app.command("quarantine")
def quarantine(
    device_id: Annotated[str, typer.Argument(help="The device to quarantine")],
    reason: Annotated[str, typer.Option(help="Why (shown with the device)")],
    api: Api = "http://127.0.0.1:8000",
    home: Home = DEFAULT_HOME,
) -> None:
    """Quarantine a device: it refuses every non-admin command with `quarantined` until released."""
    with admin_client(api, home) as client:
        checked(client.post(f"/v1/devices/{device_id}/quarantine", json={"reason": reason}))
    console.print(f"{device_id}: quarantine requested (the twin shows it once the device actor records it)")


@device_app.command("release")
def release(
    device_id: Annotated[str, typer.Argument(help="The device to release")],
    api: Api = "http://127.0.0.1:8000",
    home: Home = DEFAULT_HOME,
) -> None:
    """Release a quarantined device."""
    with admin_client(api, home) as client:
        checked(client.delete(f"/v1/devices/{device_id}/quarantine"))
    console.print(f"{device_id}: release requested")


@device_app.command("move-shard")
def move_shard(
    device_id: Annotated[str, typer.Argument(help="The device to move")],
    to: Annotated[str, typer.Option("--to", help="The MQTT broker shard it moves to (a configured name)")],
    api: Api = "http://127.0.0.1:8000",
    home: Home = DEFAULT_HOME,
) -> None:
    """Move a device to another MQTT broker shard: prints its new credentials (shown only this once)."""
    with admin_client(api, home) as client:
        moved = checked(client.post(f"/v1/devices/{device_id}/shard", json={"shard": to}))
    sys.stdout.write(json.dumps(moved, indent=1) + "\n")
    where = f"{device_id}: on shard {moved['shard']} ({moved['mqtt_url']})"
    console.print(f"{where}; give the device its new credentials" if "credentials" in moved else where)


__all__ = ["device_app"]
