"""The floor: how fast plain aiokafka writes to and reads from the local Kafka broker.

Every later benchmark is reported as a ratio against these figures, measured in the same run on the same
machine. Produce uses the project's producer settings (acks=all, idempotent); consume reads the same
records back through a fresh consumer group.

Run it with ``hearth bench broker [--bootstrap HOST:PORT]``; without a bootstrap it starts a temporary
broker.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiokafka
from aiokafka import AIOKafkaConsumer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from hearth_bench.figures.results import write_result
from hearth_bench.harness.options import option
from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.supervision.ports import free_port
from hearth_shared.adapters.kafka import PRODUCER_SETTINGS, ensure_topics, make_producer
from hearth_shared.adapters.topics import TopicSpec

KEYS = 1000  # records are keyed like device facts, spread over the partitions


def run_broker_bench(bootstrap: str, *, messages: int, size: int, partitions: int) -> dict[str, Any]:
    """Raw produce and consume rates on a fresh topic, in msg/s and MB/s."""
    return asyncio.run(_bench(bootstrap, messages, size, partitions))


async def _bench(bootstrap: str, messages: int, size: int, partitions: int) -> dict[str, Any]:
    topic = f"bench.broker.{uuid.uuid4().hex[:8]}"
    await ensure_topics(bootstrap, [TopicSpec(topic, partitions)])
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
    ) as progress:
        produce_s = await _produce(bootstrap, topic, messages, size, progress)
        join_s, consume_s = await _consume(bootstrap, topic, messages, progress)
    mb = messages * size / 1e6
    produce = _rates(messages, mb, produce_s)
    consume = _rates(messages, mb, consume_s)
    return {
        "title": "the floor (raw aiokafka produce and consume)",
        "messages": messages,
        "size": size,
        "partitions": partitions,
        "client": f"aiokafka {aiokafka.__version__}",
        "producer_settings": PRODUCER_SETTINGS,
        "produce": produce,
        "consume": {**consume, "group_join_s": round(join_s, 3)},
        "rows": [
            {
                "path": "produce (acks=all, idempotent)",
                "msg/s": produce["msg_per_s"],
                "MB/s": produce["mb_per_s"],
            },
            {"path": "consume (fresh group)", "msg/s": consume["msg_per_s"], "MB/s": consume["mb_per_s"]},
        ],
        "notes": (
            f"{messages:,} records of {size} B, {KEYS} keys, on a fresh topic with {partitions} partitions. "
            f"Consume time runs from the first record to the last; joining the group took {join_s:.2f} s."
        ),
    }


def _rates(messages: int, mb: float, seconds: float) -> dict[str, float]:
    return {
        "seconds": round(seconds, 3),
        "msg_per_s": round(messages / seconds),
        "mb_per_s": round(mb / seconds, 2),
    }


async def _produce(bootstrap: str, topic: str, messages: int, size: int, progress: Progress) -> float:
    task = progress.add_task("produce", total=messages)
    value = b"x" * size
    keys = [f"device-{i:04d}".encode() for i in range(KEYS)]
    producer = make_producer(bootstrap, "hearth-bench")
    await producer.start()
    try:
        started = time.perf_counter()
        pending = []
        for i in range(messages):
            pending.append(await producer.send(topic, value, key=keys[i % KEYS]))
            if len(pending) == 10_000:
                await asyncio.gather(*pending)
                progress.advance(task, len(pending))
                pending.clear()
        await asyncio.gather(*pending)
        progress.advance(task, len(pending))
        return time.perf_counter() - started
    finally:
        await producer.stop()


async def _consume(bootstrap: str, topic: str, messages: int, progress: Progress) -> tuple[float, float]:
    """Seconds until the first records arrive (group join) and from then until the last."""
    task = progress.add_task("consume", total=messages)
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"bench-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    requested = time.perf_counter()
    await consumer.start()
    try:
        seen, first = 0, 0.0
        while seen < messages:
            batches = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            got = sum(len(records) for records in batches.values())
            if got and not seen:
                first = time.perf_counter()
            seen += got
            progress.advance(task, got)
        return first - requested, time.perf_counter() - first
    finally:
        await consumer.stop()


@dataclass(frozen=True)
class BrokerBench:
    """The floor: raw produce and consume rates of the broker with the project's client settings."""

    bootstrap: str | None = option(None, "A running broker; a temporary one when absent")
    messages: int = option(200_000, "Messages produced, then consumed")
    size: int = option(200, "Bytes per message")
    partitions: int = option(6, "Partitions of the bench topic")


def main(params: BrokerBench) -> dict[str, Any]:
    """Run the bench (on a temporary broker unless ``bootstrap`` is given) and write its results."""
    console = Console()
    sizes = {"messages": params.messages, "size": params.size, "partitions": params.partitions}
    if params.bootstrap:
        result = run_broker_bench(params.bootstrap, **sizes)
    else:
        with tempfile.TemporaryDirectory(prefix="hearth-bench-") as tmp:
            broker = KafkaBroker(
                data_dir=Path(tmp) / "kafka", log_dir=Path(tmp), port=free_port(), controller_port=free_port()
            )
            proc = broker.process()
            started = time.monotonic()
            proc.start()
            try:
                proc.wait_healthy(60)
                console.print(
                    f"temporary broker on {broker.bootstrap} up in {time.monotonic() - started:.1f} s"
                )
                result = run_broker_bench(broker.bootstrap, **sizes)
            finally:
                proc.stop()
    path = write_result("broker", result)
    for row in result["rows"]:
        console.print(f"{row['path']:32} {row['msg/s']:>10,.0f} msg/s {row['MB/s']:>7.1f} MB/s")
    console.print(f"written to {path} and docs/BENCHMARKS.md")
    return result
