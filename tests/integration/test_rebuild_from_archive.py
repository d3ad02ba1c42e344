"""``hearth rebuild --from-archive`` on real Kafka, Spark, PostgreSQL and Redis: the views rebuilt from the
archive (written by the Spark archive job, several micro-batches, two days whose files interleave each
partition's offsets, a poison record) plus the journal's tail beyond it equal, row by row, the views
rebuilt from the journal alone; a broken archive stops ``hearth rebuild --from-archive`` (exit 1) with
the partition named, and nothing is swapped."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hearth.cli import app
from hearth_analytics.jobs.archive import start_archive
from hearth_analytics.settings import AnalyticsSettings
from hearth_read_models.rebuild.run import COMPARED, rebuild
from hearth_shared.adapters.settings import StackSettings
from tests.integration.test_projector import query
from tests.support.archive import (
    POISON,
    facts_across_days,
    plant_gap_and_duplicate,
    produce,
    view_differences,
    views_settings,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ARCHIVED, TAIL, DEVICES = 4_000, 700, 24
PER_TRIGGER = 1_500  # records per archive micro-batch: several batches, several files per day


async def test_rebuild_from_the_archive_and_tail_equals_rebuild_from_the_journal(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    records = facts_across_days(stack, ARCHIVED + TAIL, DEVICES)
    await produce(stack, records[:2_000])
    await produce(stack, [(records[0][0], POISON, records[0][2])])  # skipped by both rebuilds
    await produce(stack, records[2_000:ARCHIVED])
    table = tmp_path / "archive"
    archiving = AnalyticsSettings(
        stack=stack, checkpoint_dir=tmp_path / "ckpt", archive_url=str(table),
        archive_max_offsets_per_trigger=PER_TRIGGER,
    )  # fmt: skip
    start_archive(spark, archiving, once=True).awaitTermination()
    await produce(stack, records[ARCHIVED:])  # the tail: in the journal only
    archived = spark.read.parquet(str(table))
    assert archived.count() == ARCHIVED + 1
    assert {str(r["day"]) for r in archived.select("day").distinct().collect()} == {
        "2026-11-20",
        "2026-11-21",
    }

    journal, from_archive = views_settings(stack, "journal"), views_settings(stack, "archive")
    by_journal = await rebuild(journal, batch_size=700)
    by_archive = await rebuild(from_archive, batch_size=700, archive=table)

    assert by_journal.swapped and by_archive.swapped
    assert all(c.ok for c in by_archive.checks), by_archive.checks
    assert by_archive.from_archive == ARCHIVED + 1  # the poison record is archived, and skipped
    assert by_archive.events == by_journal.events == ARCHIVED + TAIL + 1
    assert by_archive.skipped == by_journal.skipped == 1
    assert await view_differences(stack, journal.schema_name, from_archive.schema_name) == dict.fromkeys(
        (t.name for t in COMPARED), 0
    )
    [(history,)] = query(stack.postgres_dsn, f"SELECT count(*) FROM {from_archive.schema_name}.device_events")
    assert history == ARCHIVED + TAIL
    # the positions stored with the views are the journal's ends: the live projector goes on from there
    offsets = query(
        stack.postgres_dsn,
        f"SELECT topic, sum(next_offset) FROM {from_archive.schema_name}.consumed_offsets GROUP BY topic",
    )
    assert dict(offsets)[stack.topics.journal] == ARCHIVED + TAIL + 1

    removed, doubled = plant_gap_and_duplicate(table)
    broken = views_settings(stack, "broken")
    env = {
        "HEARTH_KAFKA_BOOTSTRAP_SERVERS": stack.kafka_bootstrap_servers,
        "HEARTH_TOPIC_PREFIX": stack.topic_prefix,
        "HEARTH_POSTGRES_DSN": stack.postgres_dsn,
        "HEARTH_REDIS_URL": stack.redis_url,
        "HEARTH_READ_MODELS_SCHEMA_NAME": broken.schema_name,
    }
    cli = await asyncio.to_thread(
        CliRunner().invoke, app, ["rebuild", "--from-archive", "--table", str(table)], env=env
    )
    assert cli.exit_code == 1, cli.output
    assert "Rebuild failed, nothing swapped" in cli.output
    assert re.search(rf"partition ({removed[0]}|{doubled[0]})\b", cli.output), cli.output
    schemas = "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s"
    leftovers = query(stack.postgres_dsn, schemas, f"{broken.schema_name}_%")
    assert leftovers == []  # the replay's schema was dropped; the live one was never swapped
