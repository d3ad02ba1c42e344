"""Memory per twin: what holding ``n`` device twins costs one device-actor worker.

The table, in one process: the twins are made by the device actor's own code (``DeviceActors`` with a
plain dict for its faust memory table, ``bytes`` device_id -> ``bytes`` msgpack twin, and an outbox
that drops the facts), from the requests a real thermostat's life sends: its registration, a report
with every thermostat key, then two ``set_target_temperature`` commands, each acknowledged and
reported back (so converged: two ids in ``finished``, the target in ``desired``). Each size runs in a
fresh process: RSS (psutil, after ``gc.collect()``) before and after, over the twins held; beside it
the bytes the dict, its keys and values account for (``sys.getsizeof``) and the encoded twin's size.
The actor's deadline index (one entry per online twin, which the worker keeps too) is left out while
the table fills and built after it, the way a worker rebuilds it (``rescan``); its size is counted
with ``sys.getsizeof`` (its RSS would hide in memory the fill left free).

Beyond ``built`` twins (the domain path makes about 4,000 twins/s here), the rest are copies of those,
each given its own device id, home id and two new command ids in ``finished``: the same shape and
sizes, without minutes of deciding the same facts again.

A real worker (``worker_devices`` > 0): temporary Kafka and one ``python -m hearth_device_actor``
process; its RSS once ready and idle, then the inbox gets a registration and a report with every
thermostat key per device, and once the worker has recorded every report (read from the journal), its
RSS again, after a few seconds' rest. That twin has no commands in ``finished`` and nothing desired.
"""

from __future__ import annotations

import asyncio
import gc
import random
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from multiprocessing import get_context
from typing import Any

import msgspec
import psutil

from hearth_bench.harness.options import option
from hearth_bench.harness.stack import bench_stack, console
from hearth_device_actor.service.actor import DeviceActors, InboxRecord
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.domain import decode_twin, encode_twin
from hearth_shared.schema.events import (
    AcknowledgeCommand,
    DeviceCommand,
    Event,
    Inbound,
    RegisterDevice,
    ReportState,
    SubmitCommand,
    encode,
    new_id,
    utcnow,
)
from hearth_simulator.devices.sim_thermostat import SimThermostat
from hearth_simulator.registration import fleet_devices

DEVICES_PER_HOME = 5
BATCH = 5000  # inbox records per handle_batch, as the worker's default batch size
REST_S = 5.0  # the worker's rest before its RSS is read (changelog flushed, offsets committed)


def device(i: int) -> tuple[str, str, str]:
    """Device ``i``'s (device_id, home_id, name), named as the simulator's fleet is."""
    home_id = f"home-{i // DEVICES_PER_HOME:07d}"
    body = fleet_devices(home_id, {"thermostat": i % DEVICES_PER_HOME + 1})[-1]
    return body["device_id"], home_id, body["name"]


def life(i: int, now: datetime, *, commands: int) -> Iterator[Inbound]:
    """What thermostat ``i`` sends (through the API and the gateway): its registration, a report with
    every key, then ``commands`` target changes, each acknowledged and reported back."""
    device_id, home_id, name = device(i)
    rng = random.Random(i)
    model = SimThermostat(
        seed=i,
        start=now.timestamp(),
        ambient_c=rng.uniform(16.0, 24.0),
        humidity_pct=rng.uniform(35.0, 55.0),
        hvac_mode=rng.choice(("heat", "heat", "auto", "cool", "off")),
        target_c=rng.choice((19.5, 20.0, 20.5, 21.0)),
    )
    yield RegisterDevice(
        request_id=new_id(),
        device_id=device_id,
        sent_at=now,
        home_id=home_id,
        device_type="thermostat",
        name=name,
    )
    seq = rng.randrange(10**12)  # device_seq: a device's own counter (the simulator starts from its clock)
    yield ReportState(
        request_id=new_id(),
        device_id=device_id,
        sent_at=now,
        device_seq=seq,
        device_time=now,
        state=model.state,
    )
    for n in range(commands):
        command_id, target = uuid.uuid4(), 21.5 + n
        yield SubmitCommand(
            request_id=new_id(),
            device_id=device_id,
            sent_at=now,
            home_id=home_id,
            command_id=command_id,
            name="set_target_temperature",
            params={"target_c": target},
            expires_at=now + timedelta(seconds=30),
        )
        model.apply_command("set_target_temperature", {"target_c": target}, now.timestamp())
        yield AcknowledgeCommand(
            request_id=new_id(), device_id=device_id, sent_at=now, command_id=command_id, ok=True
        )
        seq += 1
        yield ReportState(
            request_id=new_id(),
            device_id=device_id,
            sent_at=now,
            device_seq=seq,
            device_time=now,
            state=model.state,
        )


class _Dropped:
    """An outbox that drops the facts (the table is what is measured here)."""

    async def send(self, events: list[Event], commands: list[DeviceCommand]) -> None:
        pass

    async def dead_letter(self, record: InboxRecord, error: Exception) -> None:
        raise error


async def _fill(actors: DeviceActors, devices: int, commands: int) -> None:
    now = utcnow()
    batch: list[InboxRecord] = []
    for i in range(devices):
        for request in life(i, now, commands=commands):
            key = request.device_id.encode()
            batch.append(InboxRecord("inbox", 0, len(batch), key, encode(request)))
        if len(batch) >= BATCH:
            await actors.handle_batch(batch)
            batch = []
    await actors.handle_batch(batch)


def _copies(twins: dict[bytes, bytes], built: int, devices: int) -> None:
    """Twins ``built``..``devices``: copies of the built ones with their own ids (see the docstring)."""
    originals = list(twins.values())
    for i in range(built, devices):
        twin = decode_twin(originals[i % built])
        device_id, home_id, name = device(i)
        finished = tuple(str(uuid.uuid4()) for _ in twin.finished)
        copy = msgspec.structs.replace(
            twin, device_id=device_id, home_id=home_id, name=name, finished=finished
        )
        twins[device_id.encode()] = encode_twin(copy)


def _rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def _accounted(mapping: dict[Any, Any]) -> int:
    """The bytes a dict, its keys and its values take (``sys.getsizeof``; values are flat)."""
    return sys.getsizeof(mapping) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in mapping.items())


def measure_table(devices: int, built: int, commands: int = 2) -> dict[str, Any]:
    """In this (fresh) process: the table holding ``devices`` twins, then the deadline index over them."""
    twins: dict[bytes, bytes] = {}
    actors = DeviceActors(twins, _Dropped(), offline_after_s=60.0)
    actors._watch = lambda key, twin: None  # type: ignore[method-assign]  # measured apart, below
    before = _rss()
    began = time.perf_counter()
    asyncio.run(_fill(actors, min(built, devices), commands))
    build_s = time.perf_counter() - began
    _copies(twins, min(built, devices), devices)
    table = _rss()
    del actors._watch
    actors.rescan()
    sizes = [len(value) for value in twins.values()]
    sample = decode_twin(twins[device(devices - 1)[0].encode()])
    return {
        "devices": len(twins),
        "built_by_the_actor": min(built, devices),
        "build_s": round(build_s, 1),
        "rss_before_mb": round(before / 2**20, 1),
        "rss_growth_per_twin_b": round((table - before) / len(twins)),
        "accounted_per_twin_b": round(_accounted(twins) / len(twins)),
        "encoded_mean_b": round(sum(sizes) / len(sizes)),
        "encoded_max_b": max(sizes),
        "deadline_index_accounted_per_twin_b": round(_accounted(actors.deadlines) / len(twins)),
        "deadlines": len(actors.deadlines),
        "sample_twin": msgspec.to_builtins(sample),
    }


def _in_fresh_process(devices: int, built: int) -> dict[str, Any]:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(measure_table, devices, built).result()


def encoded_size(commands: int, devices: int = 1000) -> float:
    """The mean encoded size of twins made with ``commands`` commands (here, in this process)."""
    twins: dict[bytes, bytes] = {}
    asyncio.run(_fill(DeviceActors(twins, _Dropped(), offline_after_s=60.0), devices, commands))
    return sum(map(len, twins.values())) / len(twins)


# ----------------------------------------------------------------------------------------- a worker


async def _send_lives(bootstrap: str, topic: str, devices: range) -> None:
    """Each device's registration and full report, on the inbox keyed by device_id."""
    producer = make_producer(bootstrap, "bench-memory", linger_ms=20)
    await producer.start()
    try:
        now = utcnow()
        sent = []
        for i in devices:
            for request in life(i, now, commands=0):
                sent.append(await producer.send(topic, encode(request), key=request.device_id.encode()))
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def measure_worker(devices: int) -> dict[str, Any]:
    """A real worker's RSS once ready and after a tenth, half and all of the devices. The growth over
    the second half is the marginal cost of a twin, without what the worker keeps once it has worked at
    all (buffers, a heap grown by the first batches)."""
    from hearth_bench.benches.actor import follow_journal

    env = {"HEARTH_DEVICE_ACTOR_OFFLINE_AFTER_S": "86400"}  # nobody goes offline while it fills
    marks = sorted({devices // 10, devices // 2, devices} - {0})
    with bench_stack("memory", services=("device-actor",), databases=False, env=env) as stack:
        worker = psutil.Process(stack.pid("device-actor"))
        settings = stack.settings
        time.sleep(REST_S)
        ready = worker.memory_info().rss
        rss: dict[int, int] = {}
        console.print(f"worker ready, RSS {ready / 2**20:.0f} MB; {devices:,} registrations and reports")
        began = time.perf_counter()
        peak = 0.0
        for start, stop in zip([0, *marks], marks, strict=False):
            asyncio.run(
                _send_lives(settings.kafka_bootstrap_servers, settings.topics.inbox, range(start, stop))
            )
            seen = asyncio.run(follow_journal(settings, stop, worker.pid))
            peak = max(peak, seen["peak_rss_mb"])
            time.sleep(REST_S)
            rss[stop] = worker.memory_info().rss
            console.print(f"{stop:,} twins: RSS {rss[stop] / 2**20:.0f} MB")
        took = time.perf_counter() - began
        stack.check_running()
    half = devices // 2
    return {
        "devices": devices,
        "rss_ready_mb": round(ready / 2**20, 1),
        "rss_mb": {n: round(r / 2**20, 1) for n, r in rss.items()},
        "peak_rss_mb": round(peak, 1),
        "rss_growth_per_twin_b": {n: round((r - ready) / n) for n, r in rss.items()},
        "marginal_rss_per_twin_b": round((rss[devices] - rss[half]) / (devices - half)),
        "encoded_mean_b": round(encoded_size(commands=0)),
        "seconds": round(took, 1),
    }


# ------------------------------------------------------------------------------------------- the bench


def run_memory_bench(sizes: list[int], *, built: int, worker_devices: int) -> dict[str, Any]:
    tables = []
    for devices in sizes:
        console.print(f"the table with {devices:,} twins, in a fresh process ...")
        tables.append(_in_fresh_process(devices, built))
        t = tables[-1]
        console.print(
            f"  {t['rss_growth_per_twin_b']} B/twin RSS, {t['accounted_per_twin_b']} B accounted, "
            f"{t['encoded_mean_b']} B encoded; deadline index "
            f"{t['deadline_index_accounted_per_twin_b']} B/twin"
        )
    worker = measure_worker(worker_devices) if worker_devices else None
    rows = [
        {
            "what": f"table dict in one process, {t['devices']:,} twins",
            "RSS growth B/twin": t["rss_growth_per_twin_b"],
            "accounted B/twin": t["accounted_per_twin_b"],
            "encoded B/twin": t["encoded_mean_b"],
            "deadline index B/twin": t["deadline_index_accounted_per_twin_b"],
        }
        for t in tables
    ]
    if worker:
        n, half = worker["devices"], worker["devices"] // 2
        growth_rows = [
            (f"device-actor worker, ready -> {m:,} twins", growth)
            for m, growth in worker["rss_growth_per_twin_b"].items()
            if m != half
        ]
        for what, growth in [
            *growth_rows,
            (f"device-actor worker, {half:,} -> {n:,} twins", worker["marginal_rss_per_twin_b"]),
        ]:
            rows.append(
                {
                    "what": what,
                    "RSS growth B/twin": growth,
                    "accounted B/twin": "",
                    "encoded B/twin": worker["encoded_mean_b"],
                    "deadline index B/twin": "(in the RSS)",
                }
            )
    copies = [t for t in tables if t["devices"] > t["built_by_the_actor"]]
    return {
        "title": "memory per twin held by one worker",
        "tables": tables,
        "worker": worker,
        "rows": rows,
        "notes": (
            "Table rows: the twins table as the device actor's faust memory store holds it, a dict of "
            "`bytes` device_id -> `bytes` msgpack twin, filled by the actor's own code (`DeviceActors`, "
            "facts dropped) in a fresh process, from each thermostat's registration, a report with all "
            "seven thermostat keys and two target commands acknowledged and reported back (two ids in "
            "`finished`). This is the table's in-memory store in one process, not a whole faust worker. "
            "RSS growth is psutil's RSS after `gc.collect()`, after minus before, over the twins; "
            "'accounted' is `sys.getsizeof` of the dict, its keys and values (RSS can come out below it: "
            "the table reuses memory the fill's passing objects left free). The deadline index "
            "(device_id -> next deadline, one per online twin) is the actor's too: built after the table "
            "as `rescan` builds it, given as accounted bytes. "
            + (
                " ".join(
                    f"Of the {t['devices']:,} twins, {t['built_by_the_actor']:,} were made by the actor's "
                    "code and the rest are copies of them with their own device, home and command ids."
                    for t in copies
                )
                + " "
                if copies
                else ""
            )
            + (
                "Worker rows: one real `python -m hearth_device_actor` process on a temporary broker, "
                "given a registration and a report with all thermostat keys per device, in steps; "
                f"its RSS {worker['rss_ready_mb']:.0f} MB once ready and idle, then "
                + ", ".join(f"{mb:.0f} MB with {n:,} twins" for n, mb in worker["rss_mb"].items())
                + f" (each {REST_S:g} s after it recorded the last report; "
                f"peak {worker['peak_rss_mb']:.0f} MB, {worker['seconds']:.0f} s in all). The last row "
                "is the growth over the second half: what one more twin costs once the worker has worked "
                "(its buffers and the heap its first batches grew are in the others). Its twins have "
                "nothing in `finished` or `desired` (the encoded size of that shape is given). "
                if worker
                else ""
            )
            + "Target: under 1 KB per twin."
        ),
    }


@dataclass(frozen=True)
class MemoryBench:
    """Memory per twin: the twins table in one process (100k and 1M twins) and a real worker."""

    sizes: tuple[int, ...] = option(
        (100_000, 1_000_000), "Twins in the table (repeat for more sizes)", flag="--size"
    )
    built: int = option(100_000, "Twins made by the actor's code; the rest are copies")
    worker_devices: int = option(1_000_000, "Devices registered and reported to a real worker (0: none)")


def main(params: MemoryBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    result = run_memory_bench(list(params.sizes), built=params.built, worker_devices=params.worker_devices)
    path = write_result("memory", result)
    console.print(f"written to {path}")
    return result
