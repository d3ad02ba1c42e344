"""The archive table's commit log: which Parquet files make the table.

The archive (``hearth_analytics.jobs.archive``) is written by Spark's Parquet file sink, whose commit log is
``<table>/_spark_metadata/``: one file per micro-batch (``<batch id>``), and every
``spark.sql.streaming.fileSink.log.compactInterval`` batches a ``<batch id>.compact`` file holding all
entries up to it (older log files may then be deleted). Each log file is a version line (``v1``) then
one JSON object per line: ``{"path": <file URI>, "size": ..., "isDir": ..., "modificationTime": ...,
"blockReplication": ..., "blockSize": ..., "action": "add"}``.

The table is exactly the files named by the newest ``.compact`` file and the batch files after it (what
Spark's ``MetadataLogFileIndex`` reads): a Parquet file under the table that no log entry names is the
output of a micro-batch that was killed before it committed, or a file compaction replaced, and must not
be read. Hence ``committed_files`` rather than a directory listing, everywhere: the analytics and the
``hearth archive`` commands (``hearth_analytics.archive_files.archive_table``) and ``hearth rebuild
--from-archive`` (``hearth_read_models.rebuild.archive_source``) read the table through it. (Spark 4.3's
file sink no longer writes or honours ``"action": "delete"``; an entry with it is taken as a removal
here, which no writer of this project produces.)

The table may be local or on S3 (``archive_store``: one pyarrow filesystem for both); every function
takes the store, or a local path or URL it opens. ``replace_log_file`` is how compaction
(``hearth_analytics.archive_files.archive_compact``) rewrites the newest ``.compact`` file, whole for readers
(``ArchiveStore.write_whole``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hearth_shared.adapters.archive_store import ArchiveStore, as_store
from hearth_shared.adapters.archive_store import ArchiveUnreadable as ArchiveUnreadable

METADATA_DIR = "_spark_metadata"
LOG_VERSION = "v1"
COMPACT_SUFFIX = ".compact"
_LOG_NAME = re.compile(r"^(\d+)(\.compact)?$")

Table = ArchiveStore | str | Path  # a store, or a local path or URL to open one at


@dataclass(frozen=True)
class CommittedFile:
    path: str  # on the store's filesystem
    size: int


@dataclass(frozen=True)
class LogFile:
    batch: int
    compact: bool
    path: str


def log_files(table: Table) -> tuple[list[LogFile], int | None]:
    """The log files to read, in batch order: the newest ``.compact`` file and every one after it; and
    the newest batch id (None: no log yet)."""
    store = as_store(table)
    logs: list[LogFile] = []
    for entry in store.listing(store.join(METADATA_DIR)):
        match = _LOG_NAME.match(entry.base_name)
        if match:
            logs.append(LogFile(int(match.group(1)), match.group(2) is not None, entry.path))
    compacts = [log.batch for log in logs if log.compact]
    start = max(compacts) if compacts else -1
    chosen = sorted(
        (log for log in logs if (log.compact and log.batch == start) or log.batch > start),
        key=lambda log: log.batch,
    )
    return chosen, (max(log.batch for log in logs) if logs else None)


def read_log_file(table: Table, path: str) -> list[dict[str, Any]]:
    """The entries of one log file, in order."""
    lines = as_store(table).read_text(path).splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ArchiveUnreadable(f"{path}: not a file-sink log (no version line)")
    return [json.loads(line) for line in lines[1:] if line.strip()]


def replace_log_file(table: Table, path: str, entries: list[dict[str, Any]]) -> None:
    """Write ``path`` anew with ``entries``; a reader reads the old file or the new one, whole."""
    text = LOG_VERSION + "\n" + "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
    as_store(table).write_whole(path, text)


def committed_files(table: Table) -> list[CommittedFile]:
    """The Parquet files of the table's committed micro-batches, in log order (empty if none)."""
    store = as_store(table)
    files: dict[str, CommittedFile] = {}
    for log in log_files(store)[0]:
        for entry in read_log_file(store, log.path):
            if entry.get("action", "add") == "delete":
                files.pop(entry["path"], None)
            elif not entry.get("isDir", False):
                files[entry["path"]] = CommittedFile(store.path_of(entry["path"]), int(entry.get("size", 0)))
    return list(files.values())


def newest_batch(table: Table) -> int | None:
    """The id of the newest committed micro-batch (None: none yet)."""
    return log_files(table)[1]
