"""A firmware campaign over a simulated fleet: the platform's own time per wave, and how fast a gate aborts.

The stack runs on temporary servers (Kafka, PostgreSQL, Redis, Mosquitto; the device actor, projector,
query API, command API, broker-access follower, a device gateway, the campaign driver and the fleet
simulator as processes). ``devices`` simulated locks of one home are registered through the command API
and played over MQTT by the simulator, whose firmware install takes ``install_s`` (the device's own time,
not the platform's). Two campaigns then run, read back from the campaigns topic:

* **A good one** (1.0.0 -> 2.0.0) over ``waves`` with ``soak_s`` per wave. Per wave: from its
  ``campaign.wave_started`` to its ``campaign.wave_passed``, minus the soak and the simulated install:
  what the platform itself took (commands through the command path and MQTT, acks, reports, the driver
  following the journal and deciding).
* **A bad one** (2.0.0 -> 6.6.6, which every simulated device refuses with ``checksum_mismatch``) whose
  first wave fails at once: from the ``command.failed`` fact in the journal that put the wave over its
  ``max_failed_pct`` gate to the ``campaign.aborted`` fact.

There is no floor to divide by: the figures are seconds of overhead on top of the soak and install times
the campaign was given, and a gate's reaction time.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from hearth_bench.harness.load_client import cpu_share
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import BenchStack, bench_stack, console, read_topic
from hearth_shared.schema.campaign_events import (
    CampaignAborted,
    CampaignCompleted,
    CampaignFact,
    JobMoved,
    WavePassed,
    WaveStarted,
    decode_campaign_fact,
)
from hearth_shared.schema.events import CommandFailed, MalformedRecord, decode_event, fact_type, wire_name

HOME = "bench-campaign"
SHA = "ab" * 32
BAD_VERSION = "6.6.6"
GATES = {"max_failed_pct": 10, "max_offline_pct": 50, "max_anomaly_ratio": 1000}


async def _start(api: httpx.AsyncClient, version: str, waves: Sequence[float], soak_s: float) -> str:
    for fw in ("1.0.0", "2.0.0", BAD_VERSION):
        body = {"device_type": "lock", "version": fw, "url": f"https://fw.example/{fw}.bin", "sha256": SHA}
        (await api.post("/v1/firmware", json=body)).raise_for_status()
    answer = await api.post(
        "/v1/campaigns",
        json={
            "device_type": "lock",
            "version": version,
            "url": f"https://fw.example/{version}.bin",
            "sha256": SHA,
            "target": {"home_ids": [HOME]},
            "waves": list(waves),
            "soak_s": soak_s,
            "abort": GATES,
            "job_timeout_s": 120,
        },
    )
    answer.raise_for_status()
    return str(answer.json()["campaign_id"])


async def _ended(api: httpx.AsyncClient, campaign_id: str, stack: BenchStack, timeout_s: float) -> str:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        status = str((await api.get(f"/v1/campaigns/{campaign_id}")).json()["status"])
        if status in ("completed", "aborted"):
            return status
        if asyncio.get_running_loop().time() > deadline:
            raise RuntimeError(f"campaign {campaign_id} still {status} after {timeout_s:g} s")
        stack.check_running()
        await asyncio.sleep(0.5)


async def _facts(stack: BenchStack, campaign_id: str) -> list[CampaignFact]:
    found = []
    async for value in read_topic(stack.settings, stack.settings.topics.campaigns):
        try:
            fact = decode_campaign_fact(value)
        except MalformedRecord:
            continue
        if fact.campaign_id == campaign_id:
            found.append(fact)
    return found


async def _failures(stack: BenchStack) -> dict[uuid.UUID, datetime]:
    """When the journal recorded each failed command, by command id."""
    wanted, failed = wire_name(CommandFailed), {}
    async for value in read_topic(stack.settings, stack.settings.topics.journal):
        if fact_type(value) == wanted:
            fact = decode_event(value or b"")
            assert isinstance(fact, CommandFailed)
            failed[fact.payload.command_id] = fact.recorded_at
    return failed


def wave_rows(facts: list[CampaignFact], soak_s: float, install_s: float) -> list[dict[str, Any]]:
    started = {f.wave: f for f in facts if isinstance(f, WaveStarted)}
    passed = {f.wave: f for f in facts if isinstance(f, WavePassed)}
    rows = []
    for wave, start in sorted(started.items()):
        end = passed.get(wave)
        if end is None:
            continue
        took = (end.recorded_at - start.recorded_at).total_seconds()
        rows.append(
            {
                "wave": wave + 1,
                "devices": len(start.device_ids),
                "took_s": round(took, 2),
                "overhead_s": round(took - soak_s - install_s, 2),
            }
        )
    return rows


def gate_reaction_s(facts: list[CampaignFact], failed_at: dict[uuid.UUID, datetime]) -> float | None:
    """Seconds from the journal's ``command.failed`` that put the first wave over its gate to the abort."""
    aborted = next((f for f in facts if isinstance(f, CampaignAborted)), None)
    first = next((f for f in facts if isinstance(f, WaveStarted) and f.wave == 0), None)
    if aborted is None or first is None:
        return None
    size = len(first.device_ids)
    sent = {f.device_id: f.command_id for f in facts if isinstance(f, JobMoved) and f.command_id}
    failed = [sent.get(f.device_id) for f in facts if isinstance(f, JobMoved) and f.state == "failed"]
    moments = sorted(failed_at[c] for c in failed if c in failed_at)
    over = next((i for i in range(len(moments)) if (i + 1) * 100 / size > GATES["max_failed_pct"]), None)
    return None if over is None else (aborted.recorded_at - moments[over]).total_seconds()


def run_campaign_bench(
    *, devices: int, waves: Sequence[float], soak_s: float, install_s: float
) -> dict[str, Any]:
    env = {
        "HEARTH_SIMULATOR_RATE": "0.02",
        "HEARTH_SIMULATOR_FIRMWARE_FAULTS": f"{BAD_VERSION}=bad_checksum",
        "HEARTH_SIMULATOR_FIRMWARE_INSTALL_S": f"{install_s:g}",
    }
    services = ("device-actor", "projector", "query-api", "command-api", "campaigns", "simulator")
    with bench_stack("campaign", services=services, env=env) as stack:

        async def main() -> dict[str, Any]:
            admin = {"Authorization": f"Bearer {stack.token()}"}
            async with httpx.AsyncClient(base_url=stack.command_api, headers=admin, timeout=60) as api:
                console.print(f"registering {devices:,} simulated locks ...")
                await stack.register_fleet(HOME, {"lock": devices})
                await stack.wait_listed(
                    HOME,
                    devices,
                    online=False,
                    timeout_s=600 + devices / 10,
                    where=lambda twin: twin["reported"].get("firmware_version") == "1.0.0",
                    what="reporting firmware 1.0.0",
                )
                console.print("campaign 1.0.0 -> 2.0.0 ...")
                cpu_before = stack.cpu_seconds()
                loop = asyncio.get_running_loop()
                began = loop.time()
                good = await _start(api, "2.0.0", waves, soak_s)
                good_status = await _ended(api, good, stack, timeout_s=600 + len(waves) * soak_s)
                good_s = loop.time() - began
                cpu = cpu_share(cpu_before, stack.cpu_seconds(), good_s)
                console.print(f"campaign 2.0.0 -> {BAD_VERSION} (every install fails) ...")
                bad = await _start(api, BAD_VERSION, [10, 100], soak_s)
                bad_status = await _ended(api, bad, stack, timeout_s=300)
            good_facts, bad_facts = await _facts(stack, good), await _facts(stack, bad)
            completed = any(isinstance(f, CampaignCompleted) for f in good_facts)
            for name, facts in (("good", good_facts), ("bad", bad_facts)):
                jobs = Counter(f.state for f in facts if isinstance(f, JobMoved))
                why = next((f for f in facts if isinstance(f, CampaignAborted)), None)
                said = "" if why is None else f"; aborted in wave {why.wave + 1}: {why.reason} {why.health}"
                console.print(f"{name} campaign: job moves {dict(jobs)}{said}")
            return {
                "good": (good_status, completed, good_s, cpu, wave_rows(good_facts, soak_s, install_s)),
                "bad": (bad_status, gate_reaction_s(bad_facts, await _failures(stack))),
            }

        out = asyncio.run(main())
    good_status, completed, good_s, cpu, rows = out["good"]
    bad_status, reaction_s = out["bad"]
    return {
        "title": "firmware campaign over simulated devices",
        "devices": devices,
        "waves": list(waves),
        "soak_s": soak_s,
        "install_s": install_s,
        "good_campaign": {"status": good_status, "completed_fact": completed, "seconds": round(good_s, 1)},
        "bad_campaign": {
            "status": bad_status,
            "gate_to_abort_s": None if reaction_s is None else round(reaction_s, 2),
        },
        "cpu_percent_of_one_core": cpu,
        "rows": rows,
        "notes": (
            f"{devices:,} simulated locks of one home, played over MQTT by the simulator (reporting every "
            f"50 s each). A campaign 1.0.0 -> 2.0.0 in waves {list(waves)} (cumulative %), "
            f"soak {soak_s:g} s, simulated install {install_s:g} s: 'overhead_s' is each wave's time "
            "from wave_started to wave_passed minus the soak and the install, the platform's own part. "
            f"It ended {good_status} in {good_s:.0f} s. Then a campaign to {BAD_VERSION}, which every device "
            f"refuses (checksum_mismatch): from the journal's command.failed that put its first wave over "
            f"max_failed_pct {GATES['max_failed_pct']}% to campaign.aborted took "
            f"{'n/a' if reaction_s is None else f'{reaction_s:.2f} s'} (it ended {bad_status}). CPU during "
            "the good campaign, in % of one core: " + ", ".join(f"{n} {p:.0f}" for n, p in cpu.items()) + "."
        ),
    }


@dataclass(frozen=True)
class CampaignBench:
    """A firmware campaign: the platform's overhead per wave, and gate -> abort (temporary servers)."""

    devices: int = option(1000, "Simulated locks in the campaign")
    waves: str = option("1,10,50,100", "Cumulative percents, comma-separated")
    soak_s: float = option(5.0, "Soak seconds per wave", flag="--soak")
    install_s: float = option(1.0, "Simulated install seconds per device", flag="--install")


def main(params: CampaignBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    waves = [float(w) for w in params.waves.split(",")]
    result = run_campaign_bench(
        devices=params.devices, waves=waves, soak_s=params.soak_s, install_s=params.install_s
    )
    path = write_result("campaign", result)
    overheads = ", ".join(f"wave {r['wave']} {r['overhead_s']} s" for r in result["rows"])
    console.print(
        f"overhead per wave: {overheads}; gate -> abort {result['bad_campaign']['gate_to_abort_s']} s; "
        f"written to {path}"
    )
    return result
