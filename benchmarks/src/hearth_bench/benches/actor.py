"""Device-agent throughput: telemetry events per second one device-actor worker turns into journal facts.

The inbox is filled first (registrations, then telemetry reports spread over the devices); the floor is
a raw aiokafka read of that same inbox on the same broker in the same run. Then one real worker
(``python -m hearth_device_actor``, a separate process) is started and the bench reads the journal it
writes: throughput is reports / time from the first to the last ``device.state_reported`` fact. The
worker's peak RSS is sampled while it runs.

The worker runs with coalescing off (``HEARTH_DEVICE_ACTOR_COALESCE_AFTER=0``): a backlog is what makes it
fold a device's reports into one fact, and a queued inbox is a backlog, so with it on the bench would time
the overload path and never see one fact per report. Every report becoming its own fact is the per-report
cost the target is about.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from aiokafka import AIOKafkaConsumer
from rich.console import Console

from hearth_bench.figures.results import ratio_rows
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import counting_progress, raw_consume_rate
from hearth_devstack.launch.service_processes import Services, services_running
from hearth_shared.adapters.kafka import ensure_topics, make_producer, topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import RegisterDevice, ReportState, encode, new_id, utcnow

console = Console(stderr=True)
STALL_S = 60.0  # no new journal fact for this long: the worker is stuck, and the bench says so


async def fill_inbox(settings: StackSettings, devices: int, events: int, seed: int = 7) -> None:
    """Register ``devices`` thermostats and queue ``events`` telemetry reports among them."""
    rng = random.Random(seed)
    producer = make_producer(settings.kafka_bootstrap_servers, "bench-fill", linger_ms=20)
    await producer.start()
    topic = settings.topics.inbox
    ids = [f"bench-thermo-{i:07d}" for i in range(devices)]
    seqs = dict.fromkeys(ids, 0)
    now = utcnow()
    try:
        with counting_progress() as progress:
            task = progress.add_task("filling the inbox", total=devices + events)
            for device_id in ids:
                request = RegisterDevice(
                    request_id=new_id(),
                    device_id=device_id,
                    sent_at=now,
                    home_id="bench",
                    device_type="thermostat",
                    name=device_id,
                )
                await producer.send(topic, encode(request), key=device_id.encode())
            progress.advance(task, devices)
            for n in range(events):
                device_id = ids[n % devices]
                seqs[device_id] += 1
                state = {
                    "ambient_c": round(rng.uniform(19, 23), 1),
                    "humidity_pct": round(rng.uniform(35, 55), 1),
                }
                report = ReportState(
                    request_id=new_id(),
                    device_id=device_id,
                    sent_at=now,
                    device_seq=seqs[device_id],
                    device_time=now,
                    state=state,
                )
                await producer.send(topic, encode(report), key=device_id.encode())
                if n % 10_000 == 0:
                    progress.update(task, completed=devices + n)
            await producer.flush()
            progress.update(task, completed=devices + events)
    finally:
        await producer.stop()


async def follow_journal(settings: StackSettings, expected_reports: int, pid: int) -> dict[str, Any]:
    """Read the journal until ``expected_reports`` state facts arrived; time them and sample the RSS."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    worker = psutil.Process(pid)
    peak_rss = 0
    try:
        tps = await topic_partitions(consumer, settings.topics.journal)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        reports, facts, first, last = 0, 0, 0.0, 0.0
        progressed = time.monotonic()
        marker = b'"type":"device.state_reported"'
        with counting_progress() as progress:
            task = progress.add_task("worker recording facts", total=expected_reports)
            while reports < expected_reports:
                batch = await consumer.getmany(timeout_ms=1000, max_records=20_000)
                now = time.perf_counter()
                for records in batch.values():
                    facts += len(records)
                    got = sum(1 for r in records if marker in r.value[:40])
                    if got:
                        first = first or now
                        last = now
                        reports += got
                progress.update(task, completed=reports)
                if batch:
                    progressed = time.monotonic()
                elif time.monotonic() - progressed > STALL_S:
                    raise RuntimeError(
                        f"the worker wrote no journal fact for {STALL_S:.0f} s, at {reports:,} of "
                        f"{expected_reports:,} reports (its log: logs/device-actor.log)"
                    )
                peak_rss = max(peak_rss, worker.memory_info().rss)
                if not worker.is_running():
                    raise RuntimeError("the device-actor worker died during the bench")
        return {"reports": reports, "facts": facts, "seconds": last - first, "peak_rss_mb": peak_rss / 2**20}
    finally:
        await consumer.stop()


def faust_floor_rate(settings: StackSettings, expected: int) -> float:
    """faust's own ceiling: a do-nothing agent taking the same inbox in batches (a separate process)."""
    env = {
        **os.environ,
        "BENCH_BOOTSTRAP": settings.kafka_bootstrap_servers,
        "BENCH_TOPIC": settings.topics.inbox,
        "BENCH_EXPECTED": str(expected),
    }
    done = subprocess.run(
        [sys.executable, "-m", "hearth_bench.load.faust_floor"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    rates = [line.split()[-1] for line in (done.stdout + done.stderr).splitlines() if "RATE " in line]
    if not rates:
        raise RuntimeError(f"the faust floor did not finish:\n{done.stderr[-2000:]}")
    return float(rates[-1])


def run_actor_bench(bootstrap: str, *, work: Path, devices: int, events: int) -> dict[str, Any]:
    settings = StackSettings(
        kafka_bootstrap_servers=bootstrap, topic_prefix=f"bench{uuid.uuid4().hex[:6]}", token_secret="bench"
    )
    asyncio.run(ensure_topics(bootstrap, settings.topics.specs()))
    asyncio.run(fill_inbox(settings, devices, events))
    floor = asyncio.run(raw_consume_rate(settings, settings.topics.inbox, devices + events))
    console.print(f"floor: raw aiokafka consume of the inbox {floor:,.0f} records/s")
    ceiling = faust_floor_rate(settings, devices + events)
    console.print(f"faust's ceiling: a do-nothing faust agent on the same inbox {ceiling:,.0f} records/s")
    services = Services(
        settings,
        logs=work / "logs",
        data=work / "data",
        extra_env={"HEARTH_DEVICE_ACTOR_OFFLINE_AFTER_S": "86400", "HEARTH_DEVICE_ACTOR_COALESCE_AFTER": "0"},
    )
    with services_running(services, ["device-actor"]) as parts:
        worker = parts["device-actor"].proc
        assert worker is not None
        seen = asyncio.run(follow_journal(settings, events, worker.pid))
    rate = seen["reports"] / seen["seconds"]
    return {
        "title": "device-agent throughput (one worker, telemetry)",
        "devices": devices,
        "events": events,
        "floor_consume_per_s": round(floor),
        "worker_events_per_s": round(rate),
        "ratio_to_floor": round(rate / floor, 3),
        "faust_noop_agent_per_s": round(ceiling),
        "ratio_to_faust_noop": round(rate / ceiling, 3),
        "peak_worker_rss_mb": round(seen["peak_rss_mb"], 1),
        "rows": ratio_rows(
            "events/s",
            ("raw aiokafka consume of the inbox (floor)", floor),
            ("faust agent doing nothing (take_events)", ceiling),
            ("device-actor worker: reports -> journal facts", rate),
        ),
        "notes": (
            f"{events:,} telemetry reports over {devices:,} thermostats, queued before the worker starts "
            "(coalescing off, so each report is its own fact); "
            "the worker reads the inbox in batches with its own consumer (InboxFeed; faust keeps the "
            "table, its changelog and the partition assignment), decodes each report, applies it to the "
            "twin (decide/stamp/evolve), scores it, appends the fact to the journal (one record batch "
            "per partition, acks=all, idempotent), writes each touched twin to its changelog once per "
            "batch and commits the inbox offsets after flushing the changelog. The do-nothing faust "
            "agent shows why the hot path is not a faust stream. Target: 20,000 events/s per worker. "
            f"Peak RSS {seen['peak_rss_mb']:.0f} MB."
        ),
    }


@dataclass(frozen=True)
class ActorBench:
    """Device-agent throughput of one worker against the raw consume rate (and faust's own ceiling)."""

    bootstrap: str | None = option(None, "A running broker; a temporary one when absent")
    devices: int = option(1000, "Thermostats the reports are spread over")
    events: int = option(200_000, "Telemetry reports queued for the worker")


def main(params: ActorBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result
    from hearth_devstack.servers.kafka import KafkaBroker
    from hearth_devstack.supervision.ports import free_port

    with tempfile.TemporaryDirectory(prefix="hearth-bench-actor-") as tmp:
        work = Path(tmp)
        sizes = {"devices": params.devices, "events": params.events}
        if params.bootstrap:
            result = run_actor_bench(params.bootstrap, work=work, **sizes)
        else:
            broker = KafkaBroker(
                data_dir=work / "kafka", log_dir=work, port=free_port(), controller_port=free_port()
            )
            proc = broker.process()
            proc.start()
            try:
                proc.wait_healthy(90)
                result = run_actor_bench(broker.bootstrap, work=work, **sizes)
            finally:
                proc.stop()
    path = write_result("actor", result)
    console.print(
        f"{result['worker_events_per_s']:,} events/s per worker, "
        f"{result['ratio_to_floor']:.1%} of the raw consume rate; written to {path}"
    )
    return result
