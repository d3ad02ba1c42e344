"""Compaction of the archive's small files (``hearth archive compact``): a day's many micro-batch files
rewritten as one, sorted by journal partition and offset, with no reader ever seeing a row twice or not
at all, and the archive job left running; on a local table and on S3 alike (the table's filesystem is
``hearth_shared.adapters.archive_store``'s).

Why this way. Spark's file sink lists the table in its commit log (``hearth_shared.adapters.archive_log``),
and readers through Spark (``MetadataLogFileIndex``) and ours read that log, never the directory. Spark 4.3's
sink log has no way to retire a file (the ``delete`` action of Spark 2 is gone: ``FileStreamSinkLog`` has
only ``add``, read in ``spark-sql_2.13-4.3.0.jar``), and its batch ids belong to the streaming query: a
log file written under the next batch id would make the query skip its own next batch as "already
committed". What the log does have is its periodic ``<id>.compact`` file, which holds every entry up to
it and is the only one of the older files Spark reads. So compaction rewrites the newest ``.compact``
file: the compacted file is written first (in no log, so no reader sees it yet; locally under a hidden
name, renamed when whole; on S3 an object exists only once its upload completed), then the ``.compact``
file is replaced, whole (``ArchiveStore.write_whole``: a rename locally, one PUT on S3), with a copy in
which the day's replaced entries give way to one entry for the compacted file. A reader reads the old
or the new log file, whole: the old files or the new one, never both. The alternatives (a second table
for compacted days, which every reader would have to merge; Delta Lake or Iceberg, whose logs do retire
files, see ``archive.py`` for why neither runs here) cost every reader for the benefit of one writer.

Safe with the running job: the job reads the newest ``.compact`` file only when it writes the next one
(every ``spark.sql.streaming.fileSink.log.compactInterval`` batches, 10 by default) and builds it from
what it reads (the log's cache is off for the sink). If it read the file just before the replacement,
its next ``.compact`` file names the old files again: still every row once (the compacted file is then
in no log); ``compact_archive`` sees that it was undone and the next run compacts the day again. Only
files in the newest ``.compact`` file are compacted (the batches after it are the job's recent work),
and only days before ``before`` (by default today, UTC: a day still being written would be compacted
again and again). Two compactions of a local table at once are prevented by a lock file; an object store
has no lock, so on S3 one compactor runs: the archive job's own (``archive_compact_every_s``), or, with
it set to 0, ``hearth archive compact`` from one place.

A day may hold files of both archive layouts (``archive_layout``: an archive written before issue 24 and
continued by the new job): its compacted file has the newer, wider columns, the older rows' typed
columns and ``archive_layout`` null, which is how readers tell them apart.

The replaced files are not deleted at once: a reader that listed them before the replacement may still
be reading them. Each compaction records them (and the files it wrote) in ``_compaction/<time>.json``;
``_purge`` deletes, once a record is ``grace_s`` old, the replaced files, or the compacted ones if the
job named the replaced files again: never a file a log entry names. A day's rows are held in memory
while it is compacted (about three times its Parquet size).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hearth_shared.adapters.archive_log import (
    Table,
    committed_files,
    log_files,
    read_log_file,
    replace_log_file,
)
from hearth_shared.adapters.archive_store import ArchiveStore, as_store

COMPACTION_DIR = "_compaction"  # a leading underscore: Spark and pyarrow ignore it as data
ROW_GROUP_ROWS = 131_072  # a compacted file's row groups (sorted by partition: a share skips the others)
DAY_DIR_PREFIX = "day="
_RECORD_NAME = re.compile(r"^\d+\.json$")


@dataclass
class DayCompaction:
    day: str
    files: int  # files replaced
    rows: int
    bytes_before: int
    bytes_after: int
    path: str  # the compacted file, on the table's filesystem


@dataclass
class CompactionResult:
    compact_log: str | None  # the .compact file rewritten (None: nothing to do)
    days: list[DayCompaction] = field(default_factory=list)
    undone: bool = False  # the job wrote a newer .compact file from the old one meanwhile
    purged: int = 0  # replaced files deleted (recorded more than grace_s ago)


@contextlib.contextmanager
def _locked(store: ArchiveStore) -> Iterator[None]:
    """A local table's compaction lock (an object store has none: one compactor, module docstring)."""
    if not store.is_local:
        yield
        return
    work = Path(store.join(COMPACTION_DIR))
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _day_of(store: ArchiveStore, entry: dict[str, Any]) -> str | None:
    parent = PurePosixPath(store.path_of(entry["path"])).parent.name
    return parent.removeprefix(DAY_DIR_PREFIX) if parent.startswith(DAY_DIR_PREFIX) else None


def _read_whole(store: ArchiveStore, paths: list[str]) -> pa.Table:
    """The files' rows (Spark's INT96 timestamps read as microseconds, which is what they hold), in the
    widest file's columns: an older layout's rows get nulls in the columns it did not have."""
    tables = [
        _nullable(pq.ParquetFile(p, filesystem=store.fs, coerce_int96_timestamp_unit="us").read())
        for p in paths
    ]
    tables.sort(key=lambda t: -t.num_columns)  # the first table's schema (and Spark's metadata) is kept
    return pa.concat_tables(tables, promote_options="default")


def _nullable(table: pa.Table) -> pa.Table:
    """``table`` with every column nullable (Spark writes a literal column, ``archive_layout``, as required;
    an older layout's rows hold nulls in it)."""
    schema = pa.schema([f.with_nullable(True) for f in table.schema], metadata=table.schema.metadata)
    return table.cast(schema)


def _uses_int96(store: ArchiveStore, path: str) -> bool:
    schema = pq.ParquetFile(path, filesystem=store.fs).schema
    return any(schema.column(i).physical_type == "INT96" for i in range(len(schema)))


def write_compacted(store: ArchiveStore, day_dir: str, inputs: list[str]) -> tuple[str, int]:
    """The inputs' rows as one file in ``day_dir``, sorted by partition and offset, in Spark's own
    encoding (its schema metadata kept, INT96 timestamps if the inputs have them): (path, rows)."""
    rows = _read_whole(store, inputs).sort_by(
        [("kafka_partition", "ascending"), ("kafka_offset", "ascending")]
    )
    name = f"part-compacted-{uuid.uuid4()}.c000.zstd.parquet"
    final = f"{day_dir}/{name}"
    # locally a leading dot, renamed when whole: no reader of the directory takes it for data
    target = f"{day_dir}/.{name}.inprogress" if store.is_local else final
    pq.write_table(
        rows,
        target,
        filesystem=store.fs,
        compression="zstd",
        row_group_size=ROW_GROUP_ROWS,
        use_deprecated_int96_timestamps=_uses_int96(store, inputs[0]),
    )
    if target != final:
        store.fs.move(target, final)
    return final, rows.num_rows


def _entry(store: ArchiveStore, path: str, like: dict[str, Any]) -> dict[str, Any]:
    info = store.fs.get_file_info(path)
    modified = int(info.mtime.timestamp() * 1000) if info.mtime is not None else int(time.time() * 1000)
    return {**like, "path": store.uri(path), "size": info.size, "isDir": False,
            "modificationTime": modified, "action": "add"}  # fmt: skip


def compact_archive(
    table: Table, *, before: date | None = None, min_files: int = 2, grace_s: float = 600.0
) -> CompactionResult:
    """Compact every day before ``before`` (default: today, UTC) that has ``min_files`` or more files in
    the newest ``.compact`` log file; then purge files replaced more than ``grace_s`` ago."""
    store = as_store(table)
    before = before or datetime.now(UTC).date()
    with _locked(store):
        logs, _newest = log_files(store)
        if not logs or not logs[0].compact:
            return CompactionResult(None, purged=_purge(store, grace_s))
        compact = logs[0]
        entries = read_log_file(store, compact.path)
        by_day: dict[str, list[dict[str, Any]]] = {}
        for entry in entries:
            day = _day_of(store, entry)
            if day is not None and not entry.get("isDir", False) and date.fromisoformat(day) < before:
                by_day.setdefault(day, []).append(entry)
        result = CompactionResult(compact.path)
        replaced: dict[str, dict[str, Any]] = {}  # old path URI -> the compacted file's entry
        for day, day_entries in sorted(by_day.items()):
            if len(day_entries) < min_files:
                continue
            inputs = [store.path_of(e["path"]) for e in day_entries]
            path, rows = write_compacted(store, str(PurePosixPath(inputs[0]).parent), inputs)
            new = _entry(store, path, day_entries[0])
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
            replace_log_file(store, compact.path, rewritten)
            _record(store, list(replaced), [store.uri(d.path) for d in result.days])
            result.undone = _undone(store, compact.batch, set(replaced))
        result.purged = _purge(store, grace_s)
        return result


def _undone(store: ArchiveStore, batch: int, replaced: set[str]) -> bool:
    """Did the job write a newer ``.compact`` file from the one before the rename (naming the old files)?"""
    logs, _ = log_files(store)
    if not logs or logs[0].batch == batch:
        return False
    return any(e["path"] in replaced for e in read_log_file(store, logs[0].path))


def _record(store: ArchiveStore, replaced: list[str], compacted: list[str]) -> None:
    record = store.join(COMPACTION_DIR, f"{time.time_ns()}.json")
    store.write_whole(record, json.dumps({"at": time.time(), "replaced": replaced, "compacted": compacted}))


def _records(store: ArchiveStore) -> list[tuple[str, dict[str, Any]]]:
    """The compaction records (path, content), oldest first."""
    found = [
        info.path for info in store.listing(store.join(COMPACTION_DIR)) if _RECORD_NAME.match(info.base_name)
    ]
    return [(path, json.loads(store.read_text(path))) for path in sorted(found)]


def awaiting_purge(table: Table) -> set[str]:
    """Files a compaction recorded (replaced, or written and undone) that ``_purge`` has not deleted yet."""
    store = as_store(table)
    found: set[str] = set()
    for _path, content in _records(store):
        found |= {store.path_of(uri) for uri in [*content["replaced"], *content["compacted"]]}
    return found


def _purge(store: ArchiveStore, grace_s: float) -> int:
    """Files a compaction recorded more than ``grace_s`` ago that no log entry names any more, deleted:
    the files it replaced; or, if the job named those again (it wrote its next ``.compact`` log from
    the one before the rename: the compaction was undone), the compacted files it wrote."""
    records = _records(store)
    if not records:
        return 0
    named = {f.path for f in committed_files(store)}
    deleted = 0
    for record, content in records:
        if time.time() - float(content["at"]) < grace_s:
            continue
        replaced = [store.path_of(uri) for uri in content["replaced"]]
        undone = any(p in named for p in replaced)
        for p in [store.path_of(uri) for uri in content["compacted"]] if undone else replaced:
            if p not in named and store.exists(p):
                store.fs.delete_file(p)
                deleted += 1
        store.fs.delete_file(record)
    return deleted
