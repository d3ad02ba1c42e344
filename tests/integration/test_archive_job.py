"""The archive job on real Kafka and Spark: killed with -9 mid-run (driver and JVM), restarted, it leaves
every journal record in the table exactly once (poison too), partitioned by day, readable by pyarrow
from the committed files; ``hearth archive verify`` passes on it and fails on a planted gap and
duplicate, naming them."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path, PurePosixPath

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from hearth.groups.archive_cli import archive_app, inspect_archive
from hearth_analytics.archive_files.archive_table import committed_files, journal_ranges, read_columns
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import decode_event
from tests.support.archive import (
    POISON,
    archive_env,
    committed_batches,
    kill_group,
    plant_gap_and_duplicate,
    produce,
    readings,
    start_archive_job,
)
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DEVICES, PER_DEVICE = 20, 60  # 1,200 facts, plus one poison record
PER_TRIGGER = 150  # records per micro-batch: several batches, so a kill lands between and inside them


async def test_archive_exactly_once_across_kill_and_verify(stack: StackSettings, tmp_path: Path) -> None:
    records = readings(DEVICES, PER_DEVICE)
    await produce(stack, records[:600])
    await produce(stack, [("dev-0", POISON, records[600][2])])
    await produce(stack, records[600:])
    table, log = tmp_path / "archive", tmp_path / "archive.log"
    env = archive_env(
        stack, table, tmp_path / "checkpoints",
        HEARTH_ANALYTICS_ARCHIVE_MAX_OFFSETS_PER_TRIGGER=str(PER_TRIGGER),
        HEARTH_ANALYTICS_ARCHIVE_TRIGGER_S="0.5",
    )  # fmt: skip

    job = start_archive_job(env, log, once=False)
    try:

        def committed() -> bool:  # two micro-batches committed, more to come
            assert job.poll() is None, f"the archive job exited early:\n{log.read_text()[-3000:]}"
            return committed_batches(table) >= 1

        await eventually(
            committed,
            "a micro-batch committed",
            timeout_s=400,
            every_s=0.2,
            shown=lambda: log.read_text()[-3000:],
        )
    finally:
        kill_group(job)
    at_kill = len(read_columns(table, ["kafka_offset"]))
    assert 0 < at_kill < len(records) + 1, "the kill should land while the journal is partly archived"

    # The rest in one batch (the setting's default): only the kill needed small ones. The batch it cut
    # short is run again with the offsets its log recorded, whatever the limit is now.
    rest = {k: v for k, v in env.items() if k != "HEARTH_ANALYTICS_ARCHIVE_MAX_OFFSETS_PER_TRIGGER"}
    rerun = start_archive_job(rest, log, once=True)
    try:
        assert await asyncio.to_thread(rerun.wait, 400) == 0, log.read_text()[-3000:]
    finally:
        kill_group(rerun)

    rows = read_columns(
        table,
        ["kafka_partition", "kafka_offset", "device_id", "version", "device_seq", "reported__ambient_c",
         "payload", "value", "archive_layout", "day"],
    )  # fmt: skip
    where = Counter(
        zip(rows.column("kafka_partition").to_pylist(), rows.column("kafka_offset").to_pylist(), strict=True)
    )
    assert max(where.values()) == 1, "a journal record was archived twice"
    journal = await journal_ranges(stack)
    assert len(rows) == sum(r.high - r.low for r in journal.values()) == len(records) + 1  # poison too
    values = rows.column("value").to_pylist()
    assert values.count(POISON) == 1
    archived = sorted((f.device_id, f.version) for f in (decode_event(v) for v in values if v != POISON))
    assert archived == sorted((f"dev-{d}", v) for d in range(DEVICES) for v in range(1, PER_DEVICE + 1))
    typed = [(d, v) for d, v in zip(rows.column("device_id").to_pylist(), rows.column("version").to_pylist(),
                                    strict=True) if d is not None]  # fmt: skip
    assert sorted(typed) == archived  # the envelope's typed columns agree with the record
    # a state report's readings and seq in typed columns, and no payload text: the columns hold it all
    assert set(rows.column("archive_layout").to_pylist()) == {2}
    assert set(rows.column("payload").to_pylist()) == {None}
    ambient, seq = rows.column("reported__ambient_c").to_pylist(), rows.column("device_seq").to_pylist()
    for value, a, s in zip(values, ambient, seq, strict=True):
        payload = json.loads(value)["payload"] if value != POISON else {"reported": {}}
        assert (a, s) == (payload["reported"].get("ambient_c"), payload.get("device_seq")), value
    days = {str(d) for d in pc.unique(rows.column("day")).to_pylist()}
    assert days == {"2026-11-20", "2026-11-21"}
    files = committed_files(table)
    assert {PurePosixPath(f.path).parent.name for f in files} == {"day=2026-11-20", "day=2026-11-21"}
    # one task per journal partition: every file the job wrote holds one partition's records
    partitions_of = [set(pq.read_table(f.path, columns=["kafka_partition"])[0].to_pylist()) for f in files]
    assert all(len(p) == 1 for p in partitions_of)
    assert set().union(*partitions_of) == {p for p, r in journal.items() if r.high > r.low}

    report = inspect_archive(table, await journal_ranges(stack), complete=True)
    assert report.check.ok, report.check.problems()
    assert report.check.lag == 0 and report.files >= 2

    removed, doubled = plant_gap_and_duplicate(table)
    report = inspect_archive(table, await journal_ranges(stack))
    problems = "\n".join(report.check.problems())
    assert not report.check.ok
    assert f"partition {removed[0]}: 1 offsets missing: {removed[1]}" in problems
    assert f"partition {doubled[0]}: 1 offsets archived more than once, e.g. {doubled[1]}" in problems

    result = await asyncio.to_thread(
        CliRunner().invoke,
        archive_app, ["verify", "--table", str(table)], env={
            "HEARTH_KAFKA_BOOTSTRAP_SERVERS": stack.kafka_bootstrap_servers,
            "HEARTH_TOPIC_PREFIX": stack.topic_prefix,
        },
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "offsets missing" in result.output and "more than once" in result.output
