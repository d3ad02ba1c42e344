"""The archive table's commit log: which Parquet files make the table (standard library only).

The archive (``hearth_analytics.archive``) is written by Spark's Parquet file sink, whose commit log is
``<table>/_spark_metadata/``: one file per micro-batch (``<batch id>``), and every
``spark.sql.streaming.fileSink.log.compactInterval`` batches a ``<batch id>.compact`` file holding all
entries up to it (older log files may then be deleted). Each log file is a version line (``v1``) then
one JSON object per line: ``{"path": <file URI>, "size": ..., "isDir": ..., "modificationTime": ...,
"blockReplication": ..., "blockSize": ..., "action": "add"}``.

The table is exactly the files named by the newest ``.compact`` file and the batch files after it (what
Spark's ``MetadataLogFileIndex`` reads): a Parquet file under the table that no log entry names is the
output of a micro-batch that was killed before it committed, or a file compaction replaced, and must not
be read. Hence ``committed_files`` rather than a directory listing, everywhere: the analytics and the
``hearth archive`` commands (``hearth_analytics.archive_table``) and ``hearth rebuild --from-archive``
(``hearth_read_models.rebuild.archive_source``) read the table through it. (Spark 4.3's file sink no longer
writes or honours ``"action": "delete"``; an entry with it is taken as a removal here, which no writer
of this project produces.)

``replace_log_file`` is how compaction (``hearth_analytics.archive_compact``) rewrites the newest
``.compact`` file: written beside it and renamed over it, so a reader sees the old or the new file whole.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

METADATA_DIR = "_spark_metadata"
LOG_VERSION = "v1"
COMPACT_SUFFIX = ".compact"
_LOG_NAME = re.compile(r"^(\d+)(\.compact)?$")


class ArchiveUnreadable(RuntimeError):
    """The table's commit log is missing or malformed, or the table is not where it can be read."""


@dataclass(frozen=True)
class CommittedFile:
    path: Path
    size: int


@dataclass(frozen=True)
class LogFile:
    batch: int
    compact: bool
    path: Path


def log_files(table: Path) -> tuple[list[LogFile], int | None]:
    """The log files to read, in batch order: the newest ``.compact`` file and every one after it; and
    the newest batch id (None: no log yet)."""
    meta = table / METADATA_DIR
    if not meta.is_dir():
        return [], None
    logs: list[LogFile] = []
    for entry in meta.iterdir():
        match = _LOG_NAME.match(entry.name)
        if match:
            logs.append(LogFile(int(match.group(1)), match.group(2) is not None, entry))
    compacts = [log.batch for log in logs if log.compact]
    start = max(compacts) if compacts else -1
    chosen = sorted(
        (log for log in logs if (log.compact and log.batch == start) or log.batch > start),
        key=lambda log: log.batch,
    )
    return chosen, (max(log.batch for log in logs) if logs else None)


def read_log_file(path: Path) -> list[dict[str, Any]]:
    """The entries of one log file, in order."""
    lines = path.read_text().splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ArchiveUnreadable(f"{path}: not a file-sink log (no version line)")
    return [json.loads(line) for line in lines[1:] if line.strip()]


def replace_log_file(path: Path, entries: list[dict[str, Any]]) -> None:
    """Write ``path`` anew with ``entries``, atomically for readers (a temporary file renamed over it)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # not a log name: never read as one
    with open(temporary, "w") as out:
        out.write(LOG_VERSION + "\n" + "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries))
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def local_path(uri: str) -> Path:
    """A log entry's file URI as a local path."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        raise ArchiveUnreadable(f"{uri}: only local tables are read without Spark")
    return Path(unquote(parsed.path))


def committed_files(table: Path) -> list[CommittedFile]:
    """The Parquet files of the table's committed micro-batches, in log order (empty if none)."""
    files: dict[str, CommittedFile] = {}
    for log in log_files(table)[0]:
        for entry in read_log_file(log.path):
            if entry.get("action", "add") == "delete":
                files.pop(entry["path"], None)
            elif not entry.get("isDir", False):
                files[entry["path"]] = CommittedFile(local_path(entry["path"]), int(entry.get("size", 0)))
    return list(files.values())


def newest_batch(table: Path) -> int | None:
    """The id of the newest committed micro-batch (None: none yet)."""
    return log_files(table)[1]
