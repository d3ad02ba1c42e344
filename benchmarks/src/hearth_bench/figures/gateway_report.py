"""The result of ``hearth bench gateway`` (``bench/results/gateway.json``, its section of
docs/BENCHMARKS.md): the rows (the broker's floor, the gateway's rate with its ratio to the floor and its
CPU per message, the actor's fold of the backlog) and the notes that say what was run and what falls short.
"""

from __future__ import annotations

import os
from typing import Any

from hearth_bench.figures.gateway_figures import ratio

CONNECTIONS_PER_PUBLISHER = 4  # connections of each publisher process (mqtt_load publish)
# What changed the gateway's CPU per report, measured before and after on this machine (2026-11-24):
# kept with the figures because a later run shows only the state it measured.
HISTORY = (
    "Before the changes of 2026-11-24 (same bench, 40,000 reports, load 15-20): the gateway used 151 µs of "
    "CPU per report (the floor's subscriber 45 µs/message); a py-spy profile put 29 % of its time in the "
    "inbox writer's `put`, 13 % of it in `asyncio.shield` (two futures, a callback and a loop round more per "
    "message), 20 % in the edge (`to_request`: decode, checks, uuid5 request id) and about 45 % in gmqtt and "
    "the event loop (a task per message, a PUBACK write per message). Changes: one waiter future per record "
    "resolved by its batch instead of `shield` (the uplink's own code with a fake producer: 100 -> 48 µs per "
    "message), and uvloop as the gateway's loop (48 -> 44 µs on that harness). Changes of 2026-11-27 (issue "
    "21), after a py-spy profile put a third of the gateway's time in gmqtt's per-message path and a quarter "
    "of the edge's in `uuid5` and `find_unstorable`: MQTT messages in batches, one per read of the socket "
    "(one task, one inbox put, one write of PUBACKs: `hearth_shared.adapters.mqtt_batches`; a lean parse "
    "of the usual PUBLISH), request ids built in C, and `find_unstorable` without paths for what is fine. "
    "Measured side by side on a loaded machine (load 13-17), so as ratios only: the subscriber's CPU per "
    "message in `hearth bench mqtt-clients` fell to about a quarter with batches (gmqtt per message 35 µs, "
    "batched 9.5; by hand 4.6; paho-mqtt 88), and the uplink's own code with a stand-in producer to about "
    "0.8 of before."
)


def _waited(run: dict[str, Any]) -> str:
    if "quiet_after_s" not in run:
        return "not measured"  # a result from before the wait
    waited = run["quiet_after_s"]
    return "never quiet within 120 s" if waited is None else f"{waited} s"


def _shares(cpu: dict[str, float]) -> str:
    return ", ".join(f"{k} {v}" for k, v in cpu.items())


def gateway_result(
    figures: dict[str, Any], *, devices: int, reports: int, roundtrip: dict[str, Any] | None
) -> dict[str, Any]:
    floor, gw, hold = figures["floor"], figures["gateway"], figures["connections"]
    gateways = gw.get("gateways", 1)
    rows = [
        {
            "path": "floor: publishers -> Mosquitto -> a counting subscriber (QoS 1, each its own process)",
            "msg/s": floor["rate"],
            "ratio": 1.0,
            "gateway CPU µs/msg": "",
        },
        {
            "path": (
                "MQTT report -> one gateway process -> inbox record (actor stopped)"
                if gateways == 1
                else f"MQTT report -> {gateways} gateway processes (device slices) -> inbox record "
                "(actor stopped)"
            ),
            "msg/s": gw["inbox"]["rate"],
            "ratio": ratio(gw["inbox"]["rate"], floor["rate"]),
            "gateway CPU µs/msg": gw["gateway_us_per_report"],
        },
        {
            "path": "inbox backlog -> device actor -> journal (reports folded/s; a backlog is coalesced)",
            "msg/s": gw["journal"].get("reports_folded_per_s", gw["journal"]["rate"]),
            "ratio": "",
            "gateway CPU µs/msg": "",
        },
    ]
    load = " / ".join(f"{x:.1f}" for x in figures.get("load_average") or os.getloadavg())
    publishers = len([k for k in floor["cpu_percent_of_one_core"] if k.startswith("publisher ")])
    pub_floor, pub_gw = floor["publishers"], gw["publishers"]
    running = "one gateway" if gateways == 1 else f"{gateways} gateways (slices: each gets every message)"
    notes = [
        f"{reports:,} state reports of {devices:,} thermostats (seq 1, 2, 3 ... per device, each a change), "
        f"published at QoS 1 by {publishers} publisher processes of {CONNECTIONS_PER_PUBLISHER} connections "
        "each (packets built before the run, written a window at a time: `hearth_bench.load.mqtt_load`); "
        f"Kafka, Mosquitto, {running} and one device-actor worker on the same 2 cores; load average (1/5/15 "
        f"min) {load} at the end, other work on the machine included. The floor: the same reports through "
        "the same broker to one subscriber process that only counts (PUBLISHes parsed by hand, a read's "
        "PUBACKs in one write, the gateway's receive maximum). "
        f"Counted: floor {floor['received']:,}, inbox {gw['inbox']['received']:,}, facts "
        f"{gw['journal']['received']:,} (the actor coalesces a backlog: the latest report of a device wins "
        "within a batch, every one counted). "
        f"Each run started once the machine had been under half a core busy for 2 s ({_waited(floor)} "
        f"before the floor, {_waited(gw)} before the gateway's). "
        f"Floor run, CPU in % of one core: {_shares(floor['cpu_percent_of_one_core'])}; the publishers "
        f"wrote {pub_floor['published']:,} reports in {pub_floor['seconds']} s (to their last PUBACK). "
        f"Gateway run (device actor stopped, then started to fold the backlog): "
        f"{_shares(gw['cpu_percent_of_one_core'])}; publishers {pub_gw['published']:,} in "
        f"{pub_gw['seconds']} s. The gateway's own CPU: {gw['gateway_us_per_report']:.0f} µs per report, so "
        f"one core of its own would carry about {gw['gateway_reports_per_cpu_second']:,} reports/s."
    ]
    share = ratio(gw["inbox"]["rate"], floor["rate"])
    rate = round(gw["inbox"]["rate"] / gateways)  # per gateway process
    per_core = gw["gateway_reports_per_cpu_second"]
    gateway_cpu = sum(v for k, v in gw["cpu_percent_of_one_core"].items() if k.startswith("device-gateway"))
    notes.append(
        f"Targets (issue 21): >= 0.5 of the floor {'met' if share >= 0.5 else 'NOT met'} ({share:.2f}); "
        f">= 20,000 reports/s per gateway process {'met' if rate >= 20_000 else 'NOT met'} ({rate:,}/s "
        f"per process measured, {gateways} process(es) using {gateway_cpu} % of a core in all; at their CPU "
        f"cost a whole core would give about {per_core:,}/s)."
    )
    if hold:
        kib = hold["kib_per_connection"]
        notes.append(
            f"Connections: {hold['held']:,} devices held at once, each with its own credential "
            f"({hold['failed']:,} failed; connecting took {hold['seconds']:.1f} s; open-files limit "
            f"{figures['open_files_limit']:,}, raised to the hard limit with setrlimit). Resident memory "
            f"per connection: broker {kib['mosquitto']:.1f} KiB, gateway {kib['device-gateway']:.2f} KiB "
            f"(the gateway holds two MQTT connections whatever the devices; RSS before/after: "
            f"{hold['rss_before_mb']}, {hold['rss_after_mb']} MB)."
        )
    if roundtrip and "error" in roundtrip:
        error = roundtrip["error"].splitlines()[0]
        notes.append(f"Command round trip over MQTT: not measured in this run ({error}).")
    elif roundtrip:
        s = next((s for s in roundtrip["steps"] if s["rate_per_s"] == 200), roundtrip["steps"][-1])
        c = s["command_ms"]
        notes.append(
            f"Command round trip over MQTT (`hearth bench roundtrip`, simulator over Mosquitto and a "
            f"gateway) at {s['rate_per_s']:g}/s: p50 {c.get('p50')} ms, p99 {c.get('p99')} ms, "
            f"{s['converged_share']:.1%} converged; target p99 < 100 ms "
            + ("met." if c.get("p99", 1e9) < 100 else "not met.")
        )
    return {
        "title": "Device gateway (issue #10)",
        "devices": devices,
        "reports": reports,
        **figures,
        "roundtrip": roundtrip,
        "rows": rows,
        "notes": " ".join([*notes, HISTORY]),
    }
