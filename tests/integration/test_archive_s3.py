"""The archive on S3-compatible storage, an S3 server started in this module (moto's server mode) with an
endpoint and a key pair from the settings: the archive job (Spark's s3a connector) writes every journal
record into the committed files once, read back over the S3 API, and the daily report over it keeps its
parts there and reads them back; and an archive there is compacted, verified (``hearth archive
compact|verify --table s3a://...``) and replayed by ``rebuild --from-archive`` (pyarrow's S3 client) into
views equal to a rebuild from the journal."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from moto.server import ThreadedMotoServer
from pydantic import SecretStr
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from hearth.groups.archive_cli import archive_app
from hearth_analytics.archive_files.archive_table import committed_files
from hearth_analytics.jobs.archive import run_archive
from hearth_analytics.jobs.batch import build_report
from hearth_analytics.s3 import s3a_conf
from hearth_analytics.settings import AnalyticsSettings
from hearth_devstack.supervision.ports import free_port
from hearth_read_models.rebuild.run import COMPARED, rebuild
from hearth_shared.adapters.archive_store import S3Access, open_store
from hearth_shared.adapters.settings import StackSettings
from tests.support.archive import (
    facts_across_days,
    produce,
    readings,
    view_differences,
    views_settings,
    write_table_on,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

BUCKET, KEY_ID, SECRET = "hearth-archive", "hearth-test-key", "hearth-test-secret"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def _client(endpoint: str):  # type: ignore[no-untyped-def]
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
        region_name="us-east-1",
    )  # fmt: skip


def _committed_rows(endpoint: str, prefix: str) -> pa.Table:
    """The table's committed files (its _spark_metadata log, read over S3), concatenated."""
    s3 = _client(endpoint)
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/_spark_metadata/").get("Contents", [])
    paths: set[str] = set()
    for obj in sorted(listed, key=lambda o: o["Key"]):
        body = s3.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read().decode()
        for line in body.splitlines()[1:]:
            entry = json.loads(line)
            (paths.discard if entry["action"] == "delete" else paths.add)(entry["path"])
    tables = []
    for path in sorted(paths):
        key = path.split(f"s3a://{BUCKET}/", 1)[1]
        data = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        tables.append(pq.read_table(io.BytesIO(data), columns=["kafka_partition", "kafka_offset"]))
    return pa.concat_tables(tables)


def reach_bucket(spark: SparkSession, settings: AnalyticsSettings) -> None:
    """Point the shared session's s3a connector at the archive's bucket (its endpoint and keys), at
    runtime: the settings a job's own session gets at start-up (``hearth_analytics.s3.s3a_conf``), as
    per-bucket options, so no other bucket and no other test sees them."""
    bucket = settings.archive_url.removeprefix("s3a://").split("/", 1)[0]
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in s3a_conf(settings).items():
        option = key.removeprefix("spark.hadoop.fs.s3a.")
        if option != "impl":
            hadoop.set(f"fs.s3a.bucket.{bucket}.{option}", value)


async def test_archive_to_s3_compatible_storage(
    spark: SparkSession, stack: StackSettings, tmp_path: Path, s3_endpoint: str
) -> None:
    _client(s3_endpoint).create_bucket(Bucket=BUCKET)
    records = readings(devices=6, per_device=20)
    await produce(stack, records)
    settings = AnalyticsSettings(
        stack=stack,
        checkpoint_dir=tmp_path / "checkpoints",
        archive_url=f"s3a://{BUCKET}/journal",
        s3_endpoint=s3_endpoint,
        s3_access_key=KEY_ID,
        s3_secret_key=SecretStr(SECRET),
        s3_region="us-east-1",
    )
    reach_bucket(spark, settings)
    # The archive job once, then the daily report over it twice: the first report computes each archive
    # day's parts and keeps them on S3 beside the table, the second reads them back (archive_day_parts:
    # its listing, manifests, runs).
    await asyncio.to_thread(run_archive, settings, once=True, spark=spark)

    rows = _committed_rows(s3_endpoint, "journal")
    where = list(
        zip(rows.column("kafka_partition").to_pylist(), rows.column("kafka_offset").to_pylist(), strict=True)
    )
    assert len(where) == len(set(where)) == len(records)
    for run, computed in enumerate((2, 0)):
        made = await asyncio.to_thread(build_report, spark, settings, tmp_path / "reports" / str(run))
        assert (made.facts, made.archive_days, made.archive_days_computed) == (len(records), 2, computed)
    kept = _client(s3_endpoint).list_objects_v2(Bucket=BUCKET, Prefix="journal/_report_parts/")["Contents"]
    assert sum(1 for o in kept if o["Key"].endswith("/manifest.json")) == 1


async def test_compaction_verify_and_rebuild_from_an_s3_archive(
    stack: StackSettings, s3_endpoint: str
) -> None:
    """An archive on S3 (written as the file sink leaves it, over pyarrow's S3 client): ``hearth archive
    compact`` and ``verify`` with an ``s3a://`` table, then ``rebuild --from-archive`` from it equals a
    rebuild from the journal."""
    bucket = f"{BUCKET}-{stack.topic_prefix}".lower().replace("_", "-")[:63]
    _client(s3_endpoint).create_bucket(Bucket=bucket)
    records = facts_across_days(stack, 1_200, 16)
    placed = await produce(stack, records)
    batches: list[dict[str, list[tuple[int, int, bytes]]]] = [{} for _ in range(4)]
    for i, ((_, value, ts), (partition, offset)) in enumerate(zip(records, placed, strict=True)):
        day = datetime.fromtimestamp(ts / 1000, UTC).date().isoformat()
        batches[i * len(batches) // len(records)].setdefault(day, []).append((partition, offset, value))
    access = S3Access(
        endpoint=s3_endpoint, region="us-east-1", access_key=KEY_ID, secret_key=SecretStr(SECRET)
    )
    url = f"s3a://{bucket}/journal"
    store = open_store(url, access)
    write_table_on(store, batches, compact_at=2)
    files_before = committed_files(store)

    env = {
        "HEARTH_KAFKA_BOOTSTRAP_SERVERS": stack.kafka_bootstrap_servers,
        "HEARTH_TOPIC_PREFIX": stack.topic_prefix,
        "HEARTH_ANALYTICS_S3_ENDPOINT": s3_endpoint,
        "HEARTH_ANALYTICS_S3_REGION": "us-east-1",
        "HEARTH_ANALYTICS_S3_ACCESS_KEY": KEY_ID,
        "HEARTH_ANALYTICS_S3_SECRET_KEY": SECRET,
    }
    runner = CliRunner()
    compacted = await asyncio.to_thread(
        runner.invoke, archive_app, ["compact", "--table", url, "--grace", "0"], env=env
    )
    assert compacted.exit_code == 0, compacted.output
    assert "2026-11-20" in compacted.output and "2026-11-21" in compacted.output
    files_after = committed_files(store)
    assert len(files_after) < len(files_before)
    assert not any(store.exists(f.path) for f in files_before if f not in files_after)  # purged (grace 0)
    verified = await asyncio.to_thread(
        runner.invoke, archive_app, ["verify", "--table", url, "--complete"], env=env
    )
    assert verified.exit_code == 0, verified.output

    journal_views, archive_views = views_settings(stack, "journal_s3"), views_settings(stack, "archive_s3")
    by_journal = await rebuild(journal_views, batch_size=500)
    by_archive = await rebuild(archive_views, batch_size=500, archive=store)
    assert by_journal.swapped and by_archive.swapped
    assert by_archive.from_archive == by_archive.events == by_journal.events == len(records)
    differences = await view_differences(stack, journal_views.schema_name, archive_views.schema_name)
    assert differences == dict.fromkeys((t.name for t in COMPARED), 0)
