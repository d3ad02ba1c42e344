"""A report's parts, computed once per archive day and kept beside the archive: a report over years of
history computes only the days that changed since it last ran, and reads the rest back small.

A report whose figures merge (sums, counts, extremes, and rows kept whole) splits its work by archive
day (the table's ``day`` partition: the UTC date of each record's Kafka timestamp). ``parts_of`` turns
archive rows (``ARCHIVE_SCHEMA``, with the ``day`` column named ``archive_day``) into named frames, each
carrying ``archive_day``; the report merges every day's frames with the journal tail's
(``jobs/batch.py`` does, for the daily report). This module keeps those frames:

* **Where**: ``<table>/_report_parts/<name>-<key>/<run>/``; the leading underscore keeps it out of the
  table for Spark, pyarrow and ``hearth archive verify``. A run holds each frame as Parquet partitioned by
  ``archive_day``, and then its ``manifest.json``, written last and whole (``ArchiveStore.write_whole``):
  a run without one is never read. The manifest names each day of the run with the fingerprint of the
  day's committed files and the day's end (one past its highest offset) per journal partition.
* **Key**: a hash of ``version`` and the frames' schemas. A report whose rules change bumps its
  version, so no part computed by other rules is read; a new device type's columns change the schemas.
* **When a day's kept parts are read**: its fingerprint (the paths and sizes of the day's committed
  files, from the table's log: ``archive_log``) is the one a run recorded. A new micro-batch of the day
  or its compaction changes it, and the day is computed again: the day still being written, every time.
* **One snapshot**: the committed files are listed once. The days computed now are read from exactly
  those files, and the journal's tail (``DayParts.ends``) starts one past the ends the manifests and
  this computation recorded: every fact once, also while the archive job runs.
* **Bounded**: when the days come from more than ``MAX_RUNS`` runs, their parts are copied into one new
  run. A run no day is read from any more, or one without a manifest (its report died), is deleted once
  it is ``STALE_AFTER_S`` old (a report that started before it was replaced may still read it). Two
  reports at once each write their own runs; either's are whole.
* **A reader that may not write** (read-only credentials): the days are computed and not kept, with a
  warning, and the report is the same.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from functools import reduce
from pathlib import PurePosixPath
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.archive_layout import ARCHIVE_SCHEMA, PARTITION_COLUMN
from hearth_shared.adapters.archive_log import CommittedFile, committed_files
from hearth_shared.adapters.archive_store import ArchiveStore, open_store

log = logging.getLogger(__name__)

PARTS_DIR = "_report_parts"
MANIFEST = "manifest.json"
ARCHIVE_DAY = "archive_day"
MAX_RUNS = 8
STALE_AFTER_S = 3600.0

PartsOf = Callable[[DataFrame], dict[str, DataFrame]]


@dataclass(frozen=True)
class DayParts:
    """Every archive day's parts, and where the journal's tail begins."""

    frames: dict[str, DataFrame]  # by name: every day's rows (``archive_day`` dropped)
    ends: dict[int, int]  # journal partition -> one past its highest archived offset
    days: int  # archive days
    computed: tuple[str, ...]  # the days computed by this call (the others were read back)


@dataclass(frozen=True)
class _Run:
    path: str
    written_at: float  # epoch seconds, from the run's name (milliseconds there)
    days: dict[str, dict[str, Any]]  # its manifest's days; empty without a manifest


def _spark_path(store: ArchiveStore, path: str) -> str:
    """A path on the store as Spark takes it (a local one as it is: a file URI would quote ``day=``)."""
    return path if store.is_local else store.uri(path)


def _fingerprint(files: list[CommittedFile]) -> str:
    digest = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        digest.update(f"{f.path}\t{f.size}\n".encode())
    return digest.hexdigest()[:32]


def _by_day(files: list[CommittedFile]) -> dict[str, list[CommittedFile]]:
    days: dict[str, list[CommittedFile]] = {}
    for f in files:
        folder = PurePosixPath(f.path).parent.name  # the sink's partition folder: day=2026-11-29
        days.setdefault(folder.removeprefix(f"{PARTITION_COLUMN}="), []).append(f)
    return days


def _runs(store: ArchiveStore, home: str) -> list[_Run]:
    """The runs under ``home``, newest first."""
    found = []
    for info in store.listing(home):
        written, _, _ = info.base_name.partition("-")
        if not written.isdigit():
            continue
        manifest = f"{info.path}/{MANIFEST}"
        try:
            days = json.loads(store.read_text(manifest))["days"] if store.exists(manifest) else {}
        except (ValueError, KeyError, TypeError) as exc:  # not one this module wrote: as if it had none
            log.warning("report parts: %s unreadable (%s): its days are computed again", manifest, exc)
            days = {}
        found.append(_Run(info.path, int(written) / 1000, days))
    return sorted(found, key=lambda r: r.written_at, reverse=True)


def _write_run(
    store: ArchiveStore, home: str, frames: dict[str, DataFrame], days: dict[str, dict[str, Any]]
) -> str | None:
    """A new run of ``frames`` holding ``days``; None if it could not be written (keeping is a saving,
    not the report: a reader may not be allowed to write the table; a run left without its manifest is
    never read, and deleted once stale)."""
    run = f"{home}/{time.time_ns() // 1_000_000}-{uuid.uuid4().hex[:8]}"  # written at, in ms
    try:
        for name, frame in frames.items():
            frame.write.mode("error").partitionBy(ARCHIVE_DAY).parquet(_spark_path(store, f"{run}/{name}"))
        store.write_whole(f"{run}/{MANIFEST}", json.dumps({"days": days}, sort_keys=True))
    except Exception as exc:  # whatever Spark or the store raise: the report goes on without it
        log.warning("report parts: %d archive day(s) not kept under %s: %s", len(days), home, exc)
        return None
    return run


def _read(spark: SparkSession, store: ArchiveStore, name: str, schema: StructType,
          chosen: dict[str, str]) -> DataFrame:  # fmt: skip
    """Frame ``name`` of each day from the run chosen for it (``chosen``: day -> run)."""
    by_run: dict[str, list[date]] = {}
    for day, run in chosen.items():
        by_run.setdefault(run, []).append(date.fromisoformat(day))
    frames = [
        spark.read.schema(schema)
        .parquet(_spark_path(store, f"{run}/{name}"))
        .where(F.col(ARCHIVE_DAY).isin(*days))
        for run, days in sorted(by_run.items())
    ]
    return reduce(DataFrame.unionByName, frames)


def _forget_stale(store: ArchiveStore, runs: list[_Run], used: set[str]) -> None:
    now = time.time()
    for run in runs:
        if run.path not in used and now - run.written_at > STALE_AFTER_S:
            try:
                store.fs.delete_dir(run.path)
            except OSError as exc:  # a reader that may not write the table
                log.warning("report parts: could not delete %s: %s", run.path, exc)
            else:
                log.info("report parts: deleted %s (no day is read from it)", run.path)


def _kept(runs: list[_Run], fingerprints: dict[str, str]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Day -> (the newest run that holds the day as its files are now, the run's entry for it)."""
    kept: dict[str, tuple[str, dict[str, Any]]] = {}
    for run in runs:
        for day, entry in run.days.items():
            if day not in kept and fingerprints.get(day) == entry["files"]:
                kept[day] = (run.path, entry)
    return kept


def _archive_rows(spark: SparkSession, store: ArchiveStore, files: list[CommittedFile]) -> DataFrame:
    """Exactly these committed files' rows (not Spark's own listing of the log, which may have moved on),
    their ``day`` named ``archive_day``."""
    return (
        spark.read.schema(ARCHIVE_SCHEMA)
        .option("basePath", _spark_path(store, store.root))
        .parquet(*(_spark_path(store, f.path) for f in files))
        .withColumnRenamed(PARTITION_COLUMN, ARCHIVE_DAY)
    )


def _day_ends(rows: DataFrame, fingerprints: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each day's manifest entry: its files' fingerprint and its end per journal partition."""
    entries: dict[str, dict[str, Any]] = {
        day: {"files": files, "ends": {}} for day, files in fingerprints.items()
    }
    last = F.max("kafka_offset").alias("last")
    for row in rows.groupBy(ARCHIVE_DAY, "kafka_partition").agg(last).collect():
        entries[row[ARCHIVE_DAY].isoformat()]["ends"][str(row["kafka_partition"])] = row["last"] + 1
    return entries


def archive_day_parts(
    spark: SparkSession, settings: AnalyticsSettings, name: str, version: int, parts_of: PartsOf
) -> DayParts | None:
    """Every archive day's ``parts_of``, kept ones read back and the others computed and kept (module
    docstring); None without an archive table or with nothing committed to it."""
    store = open_store(settings.archive_location(), settings.s3_access())
    by_day = _by_day(committed_files(store))
    if not by_day:
        return None
    empty = spark.createDataFrame([], ARCHIVE_SCHEMA).withColumnRenamed(PARTITION_COLUMN, ARCHIVE_DAY)
    schemas = {part: frame.schema for part, frame in parts_of(empty).items()}
    key = hashlib.sha256(
        json.dumps([version, {part: s.json() for part, s in schemas.items()}]).encode()
    ).hexdigest()[:16]
    home = store.join(PARTS_DIR, f"{name}-{key}")
    fingerprints = {day: _fingerprint(files) for day, files in by_day.items()}
    runs = _runs(store, home)
    kept = _kept(runs, fingerprints)
    chosen = {day: run for day, (run, _) in kept.items()}  # day -> the run its parts are read from
    entries = {day: entry for day, (_, entry) in kept.items()}
    missing = tuple(sorted(set(by_day) - set(chosen)))
    fresh: dict[str, DataFrame] = {}  # the computed days' parts, if they could not be kept
    if missing:
        rows = _archive_rows(spark, store, [f for day in missing for f in by_day[day]])
        computed = _day_ends(rows, {day: fingerprints[day] for day in missing})
        parts = parts_of(rows)
        run = _write_run(store, home, parts, computed)
        if run is None:
            fresh = parts
        else:
            log.info("report parts: computed %d archive day(s) into %s", len(missing), run)
            chosen.update(dict.fromkeys(missing, run))
        entries.update(computed)
    if len(set(chosen.values())) > MAX_RUNS:  # copy them into one run
        frames = {part: _read(spark, store, part, schemas[part], chosen) for part in schemas}
        copy = _write_run(store, home, frames, {day: entries[day] for day in chosen})
        chosen = chosen if copy is None else dict.fromkeys(chosen, copy)
    _forget_stale(store, runs, set(chosen.values()))
    for other in store.listing(store.join(PARTS_DIR)):  # parts of this report's other versions
        if other.base_name.startswith(f"{name}-") and other.path != home:
            _forget_stale(store, _runs(store, other.path), set())
    ends: dict[int, int] = {}
    for entry in entries.values():
        for partition, end in entry["ends"].items():
            ends[int(partition)] = max(ends.get(int(partition), 0), int(end))
    frames = {}
    for part in schemas:
        pieces = [_read(spark, store, part, schemas[part], chosen)] if chosen else []
        pieces += [fresh[part]] if part in fresh else []
        frames[part] = reduce(DataFrame.unionByName, pieces).drop(ARCHIVE_DAY)
    return DayParts(frames, ends, len(by_day), missing)
