"""``hearth simulate``: play the simulated devices of a running local stack over MQTT until Ctrl-C, as a
hub with the stack's simulator credential (``<stack dir>/data/mosquitto/access/``, written by ``hearth
up``). ``hearth simulate --history 6w`` instead writes six weeks of history, ending now, for ``--homes``
homes of ``--thermostats`` simulated thermostats each (registered first: ``--home``, or ``{home}-0001``...
for more than one), through the same broker (history.py, history_writer.py), and exits. Added to the
``hearth`` CLI by ``register`` (this package's ``hearth.commands`` entry point); the
fleet itself is ``hearth_simulator.fleet``, which the local stack also runs as a part
(``python -m hearth_simulator``)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from hearth.support.stack_dir import DEFAULT_HOME, Home, token_secret
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.stop_signals import stop_on_signals
from hearth_shared.schema.auth import create_token
from hearth_shared.schema.mqtt import SIMULATOR_ACCOUNT

if TYPE_CHECKING:
    from hearth_simulator.fleet import MqttEndpoint

console = Console(stderr=True, soft_wrap=True)


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
    mqtt_brokers: Annotated[
        int,
        typer.Option(
            min=1,
            help="The stack's MQTT broker shards (hearth up --mqtt-brokers): a hub on each, shard i "
            "on --mqtt-port + 2i",
        ),
    ] = 1,
    history: Annotated[
        str, typer.Option(help="Write this much history ending now (6w, 10d, 12h) instead of playing live")
    ] = "",
    homes: Annotated[int, typer.Option(help="With --history: this many homes", min=1)] = 1,
    thermostats: Annotated[int, typer.Option(help="With --history: thermostats per home", min=1)] = 1,
    seed: Annotated[int, typer.Option(help="With --history: the households' and climates' seed")] = 0,
    history_rate: Annotated[
        float, typer.Option(help="With --history: at most this many reports a second (the actor's pace)")
    ] = 3000.0,
    home: Home = DEFAULT_HOME,
) -> None:
    """Play the simulated devices (registered with "simulated": true) over MQTT until Ctrl-C, as a hub
    with the stack's simulator credential."""
    from hearth_simulator.fleet import FleetOptions, MqttEndpoint, run_fleet
    from hearth_simulator.registration import register_fleet, split_evenly

    stack = StackSettings(token_secret=token_secret(home.resolve()))
    secret = home.resolve() / "data" / "mosquitto" / "access" / f"{SIMULATOR_ACCOUNT}.secret"
    if not secret.exists():
        console.print(f"[red]No simulator credential in {secret}: start the stack (hearth up) first.[/]")
        raise typer.Exit(1)
    password = secret.read_text().strip()
    mqtt = MqttEndpoint(port=mqtt_port, username=SIMULATOR_ACCOUNT, password=password)
    # One hub per shard, on the ports `hearth up --mqtt-brokers` gives them (the accounts are shard 0's).
    hubs = {str(i): MqttEndpoint(port=mqtt_port + 2 * i, username=SIMULATOR_ACCOUNT, password=password)
            for i in range(mqtt_brokers)}  # fmt: skip

    if history:
        asyncio.run(
            _write_history(api, stack, mqtt, home_id, history, homes, thermostats, seed, history_rate)
        )
        return

    async def main() -> None:
        if devices:
            admin = create_token(stack.token_secret, admin=True)
            await register_fleet(api, admin, home_id, split_evenly(devices))
        stop = stop_on_signals()
        await run_fleet(stack.kafka_bootstrap_servers, stack.topics, FleetOptions(rate=rate), hubs, stop)

    asyncio.run(main())


async def _write_history(
    api: str,
    stack: StackSettings,
    mqtt: MqttEndpoint,
    home_id: str,
    span: str,
    homes: int,
    thermostats: int,
    seed: int,
    max_per_s: float,
) -> None:
    from hearth_simulator.history import parse_duration
    from hearth_simulator.history_writer import simulate_history

    try:
        seconds = parse_duration(span)
    except ValueError as invalid:
        console.print(f"[red]--history {span!r}: {invalid}[/]")
        raise typer.Exit(2) from invalid
    home_ids = [home_id] if homes == 1 else [f"{home_id}-{n:04d}" for n in range(1, homes + 1)]
    admin = create_token(stack.token_secret, admin=True)
    _, written = await simulate_history(
        api, admin, mqtt, home_ids, thermostats, seconds, seed=seed, max_per_s=max_per_s
    )
    console.print(
        f"[green]Wrote {span} of history for {written.devices} thermostats in {len(home_ids)} homes: "
        f"{written.messages} reports in {written.elapsed_s:.1f} s.[/]"
    )


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to the ``hearth`` CLI (entry point ``hearth.commands``)."""
    app.command("simulate")(simulate)
