"""Reading the archive table without Spark: its committed files, as pyarrow (or DuckDB) reads them.

The archive (``hearth_analytics.archive``) is written by Spark's Parquet file sink, whose commit log is
``<table>/_spark_metadata/``: one file per micro-batch (``<batch id>``), and every
``spark.sql.streaming.fileSink.log.compactInterval`` batches a ``<batch id>.compact`` file holding all
entries up to it (older log files may then be deleted). Each log file is a version line (``v1``) then
one JSON object per line: ``{"path": <file URI>, "size": ..., "action": "add"|"delete", ...}``.

The table is exactly the files the log adds (and does not delete): a Parquet file under the table that
no log entry names is the output of a micro-batch that was killed before it committed, and must not be
read (Spark ignores it too). Hence ``committed_files`` rather than a directory listing, everywhere.

No Spark here (so the ``hearth archive`` commands start in a second): the standard library and pyarrow.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.dataset as ds
from aiokafka import AIOKafkaConsumer

from hearth_analytics.archive_check import OffsetRange
from hearth_shared.kafka import topic_partitions
from hearth_shared.settings import StackSettings

METADATA_DIR = "_spark_metadata"
_LOG_NAME = re.compile(r"^(\d+)(\.compact)?$")


class ArchiveUnreadable(RuntimeError):
    """The table's commit log is missing or malformed."""


@dataclass(frozen=True)
class CommittedFile:
    path: Path
    size: int


def _log_files(table: Path) -> tuple[list[tuple[int, Path]], int | None]:
    """The log files to read, in batch order: the newest ``.compact`` file and every one after it."""
    meta = table / METADATA_DIR
    if not meta.is_dir():
        return [], None
    logs: list[tuple[int, bool, Path]] = []
    for entry in meta.iterdir():
        match = _LOG_NAME.match(entry.name)
        if match:
            logs.append((int(match.group(1)), match.group(2) is not None, entry))
    compacts = [batch for batch, compact, _ in logs if compact]
    start = max(compacts) if compacts else -1
    chosen = sorted(
        (batch, path) for batch, compact, path in logs if (compact and batch == start) or batch > start
    )
    return chosen, (max(batch for batch, _, _ in logs) if logs else None)


def _local_path(uri: str) -> Path:
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        raise ArchiveUnreadable(f"{uri}: only local tables are read without Spark")
    return Path(unquote(parsed.path))


def committed_files(table: Path) -> list[CommittedFile]:
    """The Parquet files of the table's committed micro-batches (empty if nothing was committed)."""
    files: dict[str, CommittedFile] = {}
    logs, _newest = _log_files(table)
    for _batch, log_file in logs:
        lines = log_file.read_text().splitlines()
        if not lines or not lines[0].startswith("v"):
            raise ArchiveUnreadable(f"{log_file}: not a file-sink log (no version line)")
        for line in lines[1:]:
            if not line.strip():
                continue
            entry = json.loads(line)
            if entry.get("action", "add") == "delete":
                files.pop(entry["path"], None)
            elif not entry.get("isDir", False):
                files[entry["path"]] = CommittedFile(_local_path(entry["path"]), int(entry.get("size", 0)))
    return sorted(files.values(), key=lambda f: str(f.path))


def newest_batch(table: Path) -> int | None:
    """The id of the newest committed micro-batch (None: none yet)."""
    return _log_files(table)[1]


def dataset(table: Path, files: list[CommittedFile] | None = None) -> ds.Dataset:
    """The committed files as one pyarrow dataset, with the ``day`` partition column from their paths."""
    chosen = committed_files(table) if files is None else files
    return ds.dataset(
        [str(f.path) for f in chosen],
        format="parquet",
        partitioning=ds.partitioning(pa.schema([("day", pa.date32())]), flavor="hive"),
        partition_base_dir=str(table),
    )


def read_columns(table: Path, columns: list[str]) -> pa.Table:
    """Those columns of every committed row."""
    files = committed_files(table)
    if not files:
        return pa.table({name: pa.array([], pa.null()) for name in columns})
    return dataset(table, files).to_table(columns=columns)


async def journal_ranges(settings: StackSettings) -> dict[int, OffsetRange]:
    """The journal's offset range per partition now (first kept offset, next offset)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = await topic_partitions(consumer, settings.topics.journal)
        lows = await consumer.beginning_offsets(tps)
        highs = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    return {tp.partition: OffsetRange(lows[tp], highs[tp]) for tp in tps}
