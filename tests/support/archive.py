"""Helpers for the archive tests: facts on a test journal, the archive job as its own process (so it
can be killed with -9, JVM and all), tables written by hand (locally or on S3) and faults planted into
one, and the views a rebuild from an archive is compared with."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hearth_analytics.archive_files.archive_table import METADATA_DIR, committed_files, newest_batch
from hearth_read_models.rebuild.run import COMPARED
from hearth_read_models.rebuild.table_diff import compare_table
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.store.db import connect
from hearth_shared.adapters.archive_store import ArchiveStore, open_store
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import StateReported, StateReportedPayload, encode

DAY1 = datetime(2026, 11, 20, 23, 0, tzinfo=UTC)
POISON = b"\x00not json at all"


def readings(devices: int, per_device: int, home: str = "h1") -> list[tuple[str, bytes, int]]:
    """``(key, value, kafka timestamp ms)`` of state reports: the first half on one day, the rest on the
    next (so the archive gets two day partitions)."""
    records = []
    for v in range(1, per_device + 1):
        for d in range(devices):
            device = f"dev-{d}"
            t = DAY1 + timedelta(minutes=v * 120 // per_device)
            fact = StateReported(
                event_id=uuid.uuid4(), device_id=device, home_id=home, version=v, occurred_at=t,
                recorded_at=t, payload=StateReportedPayload(
                    reported={"ambient_c": 20.0 + v / 10}, device_seq=v, device_time=t),
            )  # fmt: skip
            records.append((device, encode(fact), int(t.timestamp() * 1000)))
    return records


async def produce(stack: StackSettings, records: list[tuple[str, bytes, int]]) -> list[tuple[int, int]]:
    """The records on the test journal, in order; where each went: (partition, offset)."""
    producer = make_producer(stack.kafka_bootstrap_servers, "test-archive")
    await producer.start()
    try:
        futures = [
            await producer.send(stack.topics.journal, value, key=key.encode(), timestamp_ms=ts)
            for key, value, ts in records
        ]
        placed = [await future for future in futures]
    finally:
        await producer.stop()
    return [(m.partition, m.offset) for m in placed]


def archive_env(stack: StackSettings, table: Path, checkpoints: Path, **extra: str) -> dict[str, str]:
    return {
        "HEARTH_KAFKA_BOOTSTRAP_SERVERS": stack.kafka_bootstrap_servers,
        "HEARTH_TOPIC_PREFIX": stack.topic_prefix,
        "HEARTH_ANALYTICS_ARCHIVE_URL": str(table),
        "HEARTH_ANALYTICS_CHECKPOINT_DIR": str(checkpoints),
        "HEARTH_ANALYTICS_MASTER": "local[2]",
        "HEARTH_ANALYTICS_DRIVER_MEMORY": "1g",
        "SPARK_LOCAL_IP": "127.0.0.1",
        **extra,
    }


def start_archive_job(env: dict[str, str], log: Path, *, once: bool) -> subprocess.Popen[bytes]:
    """``python -m hearth_analytics archive`` in its own process group (the JVM is in it too)."""
    argv = [sys.executable, "-m", "hearth_analytics", "archive", *(["--once"] if once else [])]
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """kill -9 of the job's whole process group (driver and JVM), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def committed_batches(table: Path) -> int:
    newest = newest_batch(table)
    return -1 if newest is None else newest


def plant_gap_and_duplicate(table: Path) -> tuple[tuple[int, int], tuple[int, int]]:
    """Remove one committed row (a gap) and commit a copy of another (a duplicate), as a corrupted table
    would hold them. Returns ``((partition, offset) removed, (partition, offset) doubled)``."""
    files = committed_files(table)
    victim = Path(files[0].path)
    rows = pq.read_table(victim)
    removed = (rows.column("kafka_partition")[0].as_py(), rows.column("kafka_offset")[0].as_py())
    pq.write_table(rows.slice(1), victim)
    doubled_rows = rows.slice(len(rows) - 1, 1)
    doubled = (
        doubled_rows.column("kafka_partition")[0].as_py(),
        doubled_rows.column("kafka_offset")[0].as_py(),
    )
    copy = victim.with_name(f"planted-{uuid.uuid4().hex}.parquet")
    pq.write_table(doubled_rows, copy)
    batch = committed_batches(table) + 1
    entry = {"path": copy.as_uri(), "size": copy.stat().st_size, "isDir": False, "modificationTime": 0,
             "blockReplication": 1, "blockSize": 0, "action": "add"}  # fmt: skip
    (table / METADATA_DIR / str(batch)).write_text("v1\n" + json.dumps(entry) + "\n")
    return removed, doubled


def facts_across_days(
    stack: StackSettings, count: int, devices: int, seed: int = 11
) -> list[tuple[str, bytes, int]]:
    """``count`` realistic facts of ``devices`` devices (``JournalFacts``) as archive test records, their
    Kafka timestamps scattered over two days (one in three on the second), so each micro-batch writes
    two files per day and a partition's offsets interleave between them."""
    from hearth_devstack.workload.journal_facts import JournalFacts

    rng = random.Random(seed)
    facts = iter(JournalFacts(devices, seed=seed, prefix=stack.topic_prefix))
    records = []
    for _ in range(count):
        fact = next(facts)
        day = DAY1 + timedelta(days=1) if rng.random() < 1 / 3 else DAY1
        records.append((fact.device_id, encode(fact), int(day.timestamp() * 1000)))
    return records


def write_table_by_hand(
    table: Path, batches: list[dict[str, list[tuple[int, int]]]], *, compact_at: int
) -> None:
    """A table as the file sink leaves it, without Spark: batch ``i`` of ``batches`` writes one file per
    day (``{day: [(partition, offset), ...]}``, each row's value ``p<partition>o<offset>``) and its log
    file; batch ``compact_at`` is a ``.compact`` log file holding every entry up to it, as the sink writes
    every ``compactInterval`` batches."""
    table.mkdir(parents=True)
    with_values = [
        {day: [(p, o, f"p{p}o{o}".encode()) for p, o in rows] for day, rows in days.items()}
        for days in batches
    ]
    write_table_on(open_store(table), with_values, compact_at=compact_at)


def write_table_on(
    store: ArchiveStore, batches: list[dict[str, list[tuple[int, int, bytes]]]], *, compact_at: int
) -> None:
    """``write_table_by_hand`` on any store (local or S3), with the rows' values given:
    ``{day: [(partition, offset, value), ...]}`` per batch."""
    files: list[list[str]] = []
    for batch, days in enumerate(batches):
        written = []
        for day, rows in days.items():
            path = store.join(f"day={day}", f"part-{batch:05d}-{uuid.uuid4()}.c000.zstd.parquet")
            if store.is_local:  # an object store has no directories
                store.fs.create_dir(store.join(f"day={day}"), recursive=True)
            pq.write_table(
                pa.table({
                    "kafka_partition": pa.array([p for p, _, _ in rows], pa.int32()),
                    "kafka_offset": pa.array([o for _, o, _ in rows], pa.int64()),
                    "value": pa.array([v for _, _, v in rows], pa.binary()),
                }),
                path,
                filesystem=store.fs,
            )  # fmt: skip
            written.append(path)
        files.append(written)
    commit_by_hand(store, files, compact_at=compact_at)


def commit_by_hand(store: ArchiveStore, batches: list[list[str]], *, compact_at: int) -> None:
    """The file sink's log for files already on ``store``: batch ``i`` names ``batches[i]``; batch
    ``compact_at`` is a ``.compact`` log file naming every file up to it."""
    entries: list[dict[str, object]] = []
    for batch, paths in enumerate(batches):
        written = [
            {"path": store.uri(path), "size": store.fs.get_file_info(path).size, "isDir": False,
             "modificationTime": 0, "blockReplication": 1, "blockSize": 0, "action": "add"}
            for path in paths
        ]  # fmt: skip
        entries += written
        name, logged = (f"{batch}.compact", entries) if batch == compact_at else (str(batch), written)
        store.write_whole(
            store.join(METADATA_DIR, name), "v1\n" + "".join(json.dumps(e) + "\n" for e in logged)
        )


def views_settings(stack: StackSettings, name: str) -> ReadModelSettings:
    """Read models in a schema of their own (a rebuild's target)."""
    return ReadModelSettings(stack=stack, schema_name=f"rm_{stack.topic_prefix}_{name}")


async def view_differences(stack: StackSettings, left: str, right: str) -> dict[str, int]:
    """Rows that differ between two schemas' views, per compared table (0 each: equal)."""
    async with await connect(stack.postgres_dsn, left) as conn:
        return {t.name: (await compare_table(conn, t, left, right))[1] for t in COMPARED}
