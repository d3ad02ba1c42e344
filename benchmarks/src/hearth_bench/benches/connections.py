"""``hearth bench connections``: how many devices stay connected at once, each with its own credentials,
and what each connection costs in memory (issue 21, point 4: 10,000 devices, and the goal of 100,000 on
this machine).

One stack: Kafka, ``brokers`` Mosquitto brokers as MQTT shards (``bench_stack(mqtt_brokers=...)``: a
broker-access follower and a device gateway per shard), one device-actor worker, no databases. The
devices are registered through the inbox with credentials (the command API's path behind its HTTP
layer, ``gateway_devices.register_devices``), each on the shard the command API would pick for it
(``assign_shard``, a stable hash of its id), so each broker's follower writes its own devices into its
password file. Then every device connects at once to its own broker (``mqtt_load hold``, one holder
process per broker, MQTT spoken by hand: CONNECT with its credential and its will, SUBSCRIBE to its
``commands``, ``online`` retained), and each broker's and gateway's resident memory is read before and
after: a broker's growth divided by the connections it holds.

Why shards and not one broker for 100,000: a connection is an open file on both ends, and this
machine's hard limit of open files per process is 20,000 (``ulimit -Hn``; not raisable here without
CAP_SYS_RESOURCE). Each Mosquitto holds at most that many, so ``brokers`` defaults to as many as the
devices need at ``PER_BROKER`` each, which is what the MQTT shards are for (issue 25).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

from hearth_bench.harness.options import option
from hearth_bench.harness.stack import bench_stack, console
from hearth_bench.load.gateway_devices import Broker, hold_connections, register_devices, wait_credentials
from hearth_bench.load.mqtt_load import raise_open_files_limit
from hearth_shared.schema.credentials import new_secret
from hearth_shared.schema.shards import assign_shard

PER_BROKER = 18_000  # devices per broker at most: under the 20,000 open files, with room for the rest
GATEWAY = "device-gateway"


@dataclass(frozen=True)
class ConnectionsBench:
    """Devices connected at once, each with its own credentials, over MQTT shards: memory per connection."""

    devices: int = option(100_000, "Devices connected at once, each with its own credentials")
    brokers: int = option(0, f"Mosquitto brokers (MQTT shards); 0: one per {PER_BROKER:,} devices")


def brokers_for(devices: int, brokers: int) -> int:
    """The brokers to run: as asked, or one per ``PER_BROKER`` devices."""
    return brokers or max(1, math.ceil(devices / PER_BROKER))


def main(params: ConnectionsBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    limit = raise_open_files_limit()
    count = brokers_for(params.devices, params.brokers)
    devices = [(f"conn-{i:06d}", new_secret()) for i in range(params.devices)]
    with bench_stack(
        "connections", services=("device-actor",), databases=False, mqtt=True, mqtt_brokers=count
    ) as stack:
        brokers = Broker.all_of(stack)
        broker_of = {b.shard: b for b in brokers}
        shard_of = {device_id: assign_shard(device_id, list(broker_of)) for device_id, _ in devices}
        by_broker: dict[Broker, list[tuple[str, str]]] = {b: [] for b in brokers}
        for device in devices:
            by_broker[broker_of[shard_of[device[0]]]].append(device)
        console.print(f"registering {params.devices:,} devices with credentials over {count} broker(s)")

        async def run() -> dict[str, Any]:
            await register_devices(stack, [], devices, shard_of.__getitem__)
            for broker, held in by_broker.items():
                await wait_credentials(stack, held, broker, timeout_s=600.0)
            gateways = {GATEWAY: brokers[0]} | {f"{GATEWAY}-{b.shard}": b for b in brokers[1:]}
            return await hold_connections(stack, by_broker, {b.part: b for b in brokers} | gateways)

        held = asyncio.run(run())
    result = connections_result(held, devices=params.devices, brokers=count, open_files=limit)
    for row in result["rows"]:
        console.print(row)
    console.print(f"written to {write_result('connections', result)}")
    return result


def connections_result(
    held: dict[str, Any], *, devices: int, brokers: int, open_files: int
) -> dict[str, Any]:
    """The result record: a row per part (held connections, RSS before and after, KiB per connection)."""
    rows = [
        {
            "part": part,
            "connections": held["connections_of"][part],
            "rss before MB": held["rss_before_mb"][part],
            "rss after MB": held["rss_after_mb"][part],
            "KiB per connection": held["kib_per_connection"][part],
        }
        for part in held["rss_before_mb"]
    ]
    brokers_kib = [held["kib_per_connection"][p] for p in held["held_per_broker"]]
    errors = f": {'; '.join(held['errors'])}" if held["errors"] else ""
    met = held["held"] >= devices >= 100_000
    notes = (
        f"{devices:,} devices, each registered through the inbox with its own credential on the MQTT shard "
        f"the command API would pick, connected at once to their own broker ({brokers} Mosquitto brokers, "
        f"one holder process each, MQTT written by hand: CONNECT with the credential and a will, SUBSCRIBE "
        f"to its commands, `online` retained); open-files limit {open_files:,} per process. Held: "
        f"{held['held']:,} ({held['failed']:,} failed{errors}); connecting took {held['seconds']:.1f} s; "
        f"{held['still_connected']:,} still connected when the bench let go. The holders' own RSS: "
        f"{held['holder_rss_mb']} MB. A broker's memory per connection: "
        f"{min(brokers_kib):.2f} to {max(brokers_kib):.2f} KiB; a gateway's is its growth over its broker's "
        f"devices (it holds two MQTT connections whatever the devices). Goal (issue 21): 10,000 devices "
        f"connected, and 100,000 on this machine with the memory per connection measured: "
        f"{'met' if met else 'not met'}."
    )
    return {
        "title": "devices connected at once (issue 21)",
        "devices": devices,
        "rows": rows,
        "notes": notes,
        **held,
    }
