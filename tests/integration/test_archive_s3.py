"""The archive job on S3-compatible storage: Spark's s3a connector writes the table to an S3 server started
in this test (moto's server mode), with an endpoint and a key pair from the settings; every journal
record is in the committed files once, read back over the S3 API."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from moto.server import ThreadedMotoServer

from hearth_devstack.process import free_port
from hearth_shared.adapters.settings import StackSettings
from tests.support.archive import archive_env, kill_group, produce, readings, start_archive_job

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


async def test_archive_to_s3_compatible_storage(
    stack: StackSettings, tmp_path: Path, s3_endpoint: str
) -> None:
    _client(s3_endpoint).create_bucket(Bucket=BUCKET)
    records = readings(devices=6, per_device=20)
    await produce(stack, records)
    env = archive_env(
        stack, tmp_path / "unused", tmp_path / "checkpoints",
        HEARTH_ANALYTICS_ARCHIVE_URL=f"s3a://{BUCKET}/journal",
        HEARTH_ANALYTICS_S3_ENDPOINT=s3_endpoint,
        HEARTH_ANALYTICS_S3_ACCESS_KEY=KEY_ID,
        HEARTH_ANALYTICS_S3_SECRET_KEY=SECRET,
        HEARTH_ANALYTICS_S3_REGION="us-east-1",
    )  # fmt: skip
    log = tmp_path / "archive.log"
    job = start_archive_job(env, log, once=True)
    try:
        assert await asyncio.to_thread(job.wait, 900) == 0, log.read_text()[-4000:]
    finally:
        kill_group(job)

    rows = _committed_rows(s3_endpoint, "journal")
    where = list(
        zip(rows.column("kafka_partition").to_pylist(), rows.column("kafka_offset").to_pylist(), strict=True)
    )
    assert len(where) == len(set(where)) == len(records)
