"""Compaction of the archive's small files (``hearth archive compact``): a day's many micro-batch files
rewritten as one, sorted by journal partition and offset, with no reader ever seeing a row twice or not
at all, and the archive job left running.

Why this way. Spark's file sink lists the table in its commit log (``hearth_shared.adapters.archive_log``),
and readers through Spark (``MetadataLogFileIndex``) and ours read that log, never the directory. Spark 4.3's
sink log has no way to retire a file (the ``delete`` action of Spark 2 is gone: ``FileStreamSinkLog`` has
only ``add``, read in ``spark-sql_2.13-4.3.0.jar``), and its batch ids belong to the streaming query: a
log file written under the next batch id would make the query skip its own next batch as "already
committed". What the log does have is its periodic ``<id>.compact`` file, which holds every entry up to
it and is the only one of the older files Spark reads. So compaction rewrites the newest ``.compact``
file: the compacted file is written first (under a hidden name, renamed when whole; in no log, so no
reader sees it yet), then the ``.compact`` file is replaced, by one rename, with a copy in which the
day's replaced entries give way to one entry for the compacted file. A reader reads the old or the new
log file, whole: the old files or the new one, never both. The alternatives (a second table for
compacted days, which every reader would have to merge; Delta Lake or Iceberg, whose logs do retire
files, see ``archive.py`` for why neither runs here) cost every reader for the benefit of one writer.

Safe with the running job: the job reads the newest ``.compact`` file only when it writes the next one
(every ``spark.sql.streaming.fileSink.log.compactInterval`` batches, 10 by default) and builds it from
what it reads (the log's cache is off for the sink). If it read the file just before the rename, its
next ``.compact`` file names the old files again: still every row once (the compacted file is then in no
log); ``compact_archive`` sees that the rename was undone and the next run compacts the day again. Only
files in the newest ``.compact`` file are compacted (the batches after it are the job's recent work), and
only days before ``before`` (by default today, UTC: a day still being written would be compacted again
and again). Two compactions at once are prevented by a lock file.

The replaced files are not deleted at once: a reader that listed them before the rename may still be
reading them. Each compaction records them (and the files it wrote) in ``_compaction/<time>.json``;
``_purge`` deletes, once a record is ``grace_s`` old, the replaced files, or the compacted ones if the
job named the replaced files again: never a file a log entry names. Only local tables. A day's rows are
held in memory while it is compacted (about three times its Parquet size).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hearth_shared.adapters.archive_log import (
    committed_files,
    local_path,
    log_files,
    read_log_file,
    replace_log_file,
)

COMPACTION_DIR = "_compaction"  # a leading underscore: Spark and pyarrow ignore it as data
ROW_GROUP_ROWS = 131_072  # a compacted file's row groups (sorted by partition: a share skips the others)
DAY_DIR_PREFIX = "day="


@dataclass
class DayCompaction:
    day: str
    files: int  # files replaced
    rows: int
    bytes_before: int
    bytes_after: int
    path: Path


@dataclass
class CompactionResult:
    compact_log: Path | None  # the .compact file rewritten (None: nothing to do)
    days: list[DayCompaction] = field(default_factory=list)
    undone: bool = False  # the job wrote a newer .compact file from the old one meanwhile
    purged: int = 0  # replaced files deleted (recorded more than grace_s ago)


@contextlib.contextmanager
def _locked(table: Path) -> Iterator[None]:
    work = table / COMPACTION_DIR
    work.mkdir(exist_ok=True)
    with open(work / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _day_of(entry: dict[str, Any]) -> str | None:
    parent = local_path(entry["path"]).parent.name
    return parent.removeprefix(DAY_DIR_PREFIX) if parent.startswith(DAY_DIR_PREFIX) else None


def _read_whole(paths: list[Path]) -> pa.Table:
    """The files' rows (Spark's INT96 timestamps read as microseconds, which is what they hold)."""
    tables = [pq.ParquetFile(p, coerce_int96_timestamp_unit="us").read() for p in paths]
    return pa.concat_tables(tables, promote_options="none")


def _uses_int96(path: Path) -> bool:
    schema = pq.ParquetFile(path).schema
    return any(schema.column(i).physical_type == "INT96" for i in range(len(schema)))


def write_compacted(day_dir: Path, inputs: list[Path]) -> tuple[Path, int]:
    """The inputs' rows as one file in ``day_dir``, sorted by partition and offset, in Spark's own
    encoding (its schema metadata kept, INT96 timestamps if the inputs have them): (path, rows)."""
    rows = _read_whole(inputs).sort_by([("kafka_partition", "ascending"), ("kafka_offset", "ascending")])
    name = f"part-compacted-{uuid.uuid4()}.c000.zstd.parquet"
    hidden = day_dir / f".{name}.inprogress"  # a leading dot: no reader takes it for data
    pq.write_table(
        rows,
        hidden,
        compression="zstd",
        row_group_size=ROW_GROUP_ROWS,
        use_deprecated_int96_timestamps=_uses_int96(inputs[0]),
    )
    final = day_dir / name
    hidden.rename(final)
    return final, rows.num_rows


def _entry(path: Path, like: dict[str, Any]) -> dict[str, Any]:
    stat = path.stat()
    return {**like, "path": path.as_uri(), "size": stat.st_size, "isDir": False,
            "modificationTime": int(stat.st_mtime * 1000), "action": "add"}  # fmt: skip


def compact_archive(
    table: Path, *, before: date | None = None, min_files: int = 2, grace_s: float = 600.0
) -> CompactionResult:
    """Compact every day before ``before`` (default: today, UTC) that has ``min_files`` or more files in
    the newest ``.compact`` log file; then purge files replaced more than ``grace_s`` ago."""
    before = before or datetime.now(UTC).date()
    with _locked(table):
        logs, _newest = log_files(table)
        if not logs or not logs[0].compact:
            return CompactionResult(None, purged=_purge(table, grace_s))
        compact = logs[0]
        entries = read_log_file(compact.path)
        by_day: dict[str, list[dict[str, Any]]] = {}
        for entry in entries:
            day = _day_of(entry)
            if day is not None and not entry.get("isDir", False) and date.fromisoformat(day) < before:
                by_day.setdefault(day, []).append(entry)
        result = CompactionResult(compact.path)
        replaced: dict[str, dict[str, Any]] = {}  # old path URI -> the compacted file's entry
        for day, day_entries in sorted(by_day.items()):
            if len(day_entries) < min_files:
                continue
            inputs = [local_path(e["path"]) for e in day_entries]
            path, rows = write_compacted(inputs[0].parent, inputs)
            new = _entry(path, day_entries[0])
            replaced |= {e["path"]: new for e in day_entries}
            result.days.append(
                DayCompaction(day, len(inputs), rows, sum(int(e["size"]) for e in day_entries),
                              new["size"], path)
            )  # fmt: skip
        if replaced:
            rewritten: list[dict[str, Any]] = []
            for entry in entries:
                compacted = replaced.get(entry["path"])
                if compacted is None:
                    rewritten.append(entry)
                elif compacted not in rewritten:  # where the day's first replaced file was
                    rewritten.append(compacted)
            replace_log_file(compact.path, rewritten)
            _record(table, list(replaced), [d.path.as_uri() for d in result.days])
            result.undone = _undone(table, compact.batch, set(replaced))
        result.purged = _purge(table, grace_s)
        return result


def _undone(table: Path, batch: int, replaced: set[str]) -> bool:
    """Did the job write a newer ``.compact`` file from the one before the rename (naming the old files)?"""
    logs, _ = log_files(table)
    if not logs or logs[0].batch == batch:
        return False
    return any(e["path"] in replaced for e in read_log_file(logs[0].path))


def _record(table: Path, replaced: list[str], compacted: list[str]) -> None:
    record = table / COMPACTION_DIR / f"{time.time_ns()}.json"
    hidden = record.with_name(f".{record.name}.tmp")
    hidden.write_text(json.dumps({"at": time.time(), "replaced": replaced, "compacted": compacted}))
    hidden.rename(record)


def awaiting_purge(table: Path) -> set[Path]:
    """Files a compaction recorded (replaced, or written and undone) that ``_purge`` has not deleted yet."""
    work = table / COMPACTION_DIR
    found: set[Path] = set()
    for record in work.glob("[0-9]*.json") if work.is_dir() else []:
        content = json.loads(record.read_text())
        found |= {local_path(uri) for uri in [*content["replaced"], *content["compacted"]]}
    return found


def _purge(table: Path, grace_s: float) -> int:
    """Files a compaction recorded more than ``grace_s`` ago that no log entry names any more, deleted:
    the files it replaced; or, if the job named those again (it wrote its next ``.compact`` log from
    the one before the rename: the compaction was undone), the compacted files it wrote."""
    work = table / COMPACTION_DIR
    if not work.is_dir():
        return 0
    named = {f.path for f in committed_files(table)}
    deleted = 0
    for record in sorted(work.glob("[0-9]*.json")):
        content = json.loads(record.read_text())
        if time.time() - float(content["at"]) < grace_s:
            continue
        replaced = [local_path(uri) for uri in content["replaced"]]
        undone = any(p in named for p in replaced)
        for p in [local_path(uri) for uri in content["compacted"]] if undone else replaced:
            if p not in named:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                    deleted += 1
        record.unlink()
    return deleted
