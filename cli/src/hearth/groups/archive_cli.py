"""``hearth archive verify|status|compact``: the journal's archive table against the journal, and its
small files compacted, without Spark (but with ``hearth_analytics``, the ``spark`` extra:
``hearth.support.needs``).

Both read the table's committed files (``hearth_analytics.archive_files.archive_table``; only the
``kafka_partition`` and ``kafka_offset`` columns) and the journal's offset range per partition from Kafka,
then ``hearth_analytics.archive_files.archive_check`` compares them. ``verify`` exits 0 when every
partition checks (1: a gap, a duplicate or an offset beyond the journal; with ``--complete`` also a lag),
``status`` prints the lag, the table's size and files (exit 0; 1 if the table has no committed file yet).

``compact`` rewrites each closed day's files into one (``hearth_analytics.archive_files.archive_compact``,
which says why it is safe with the running archive job and its readers) and deletes files it replaced
earlier.

The table: ``--table``, else ``HEARTH_ANALYTICS_ARCHIVE_URL``, else the local stack's
(``<stack dir>/data/analytics/archive``): a local directory or an ``s3a://bucket/path`` URL, reached with
the ``HEARTH_ANALYTICS_S3_*`` settings the archive job uses (``hearth_shared.adapters.archive_store``).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from datetime import date
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from hearth.support.needs import needs
from hearth.support.stack_dir import DEFAULT_HOME, Home, archive_dir
from hearth_shared.adapters.settings import StackSettings

if TYPE_CHECKING:
    from hearth_analytics.archive_files.archive_check import ArchiveCheck, OffsetRange
    from hearth_shared.adapters.archive_store import ArchiveStore

archive_app = typer.Typer(
    help="The journal's archive table: verify it, show its status, compact its small files.",
    no_args_is_help=True,
)
console = Console(soft_wrap=True)

TableOption = Annotated[
    str | None,
    typer.Option(
        "--table",
        help="The archive table, a directory or s3a://bucket/path (default: HEARTH_ANALYTICS_ARCHIVE_URL, or "
        "the stack's)",
    ),
]


def table_path(table: str | None, home: Path) -> str:
    """The table's location: a local directory (absolute) or an ``s3a://`` URL, as given."""
    chosen = table or os.environ.get("HEARTH_ANALYTICS_ARCHIVE_URL")
    if chosen is None:
        return str(archive_dir(home.resolve() / "data"))
    if "://" in chosen and not chosen.startswith("file://"):
        if not chosen.startswith("s3a://"):
            raise typer.BadParameter(
                f"{chosen}: an archive is a directory or s3a://bucket/path", param_hint="--table"
            )
        return chosen
    return str(Path(chosen.removeprefix("file://")).resolve())


def open_table(location: str) -> ArchiveStore:
    """The table's store (pyarrow, which the commands that read a table have through their extra)."""
    from hearth_shared.adapters.archive_store import open_store

    return open_store(location)


@dataclass
class ArchiveReport:
    table: str
    check: ArchiveCheck
    files: int
    bytes: int
    days: int
    newest_batch: int | None
    uncommitted_files: int  # Parquet files under the table in no commit (left by killed micro-batches;
    # not counted: the files a compaction replaced, deleted after its grace period)


def inspect_archive(
    table: ArchiveStore | Path, journal: dict[int, OffsetRange], *, complete: bool = False
) -> ArchiveReport:
    """The table's committed rows against the journal's ranges (``journal_ranges``)."""
    import numpy as np

    from hearth_analytics.archive_files.archive_check import check_archive
    from hearth_analytics.archive_files.archive_compact import awaiting_purge
    from hearth_analytics.archive_files.archive_table import (
        committed_files,
        newest_batch,
        read_columns,
    )
    from hearth_shared.adapters.archive_store import as_store

    store = as_store(table)
    files = committed_files(store)
    rows = read_columns(store, ["kafka_partition", "kafka_offset"])
    partitions = np.asarray(rows.column("kafka_partition").to_numpy(zero_copy_only=False), dtype=np.int64)
    offsets = np.asarray(rows.column("kafka_offset").to_numpy(zero_copy_only=False), dtype=np.int64)
    check = check_archive(partitions, offsets, journal, complete=complete)
    committed, compacting = {f.path for f in files}, awaiting_purge(store)
    on_disk = [  # the table's own files: not under a folder its readers skip (_spark_metadata, _report_parts)
        info.path
        for info in store.listing(store.root, recursive=True)
        if info.base_name.endswith(".parquet")
        and not any(part.startswith("_") for part in PurePosixPath(info.path).relative_to(store.root).parts)
    ]
    return ArchiveReport(
        table=store.url,
        check=check,
        files=len(files),
        bytes=sum(f.size for f in files),
        days=len({PurePosixPath(f.path).parent.name for f in files}),
        newest_batch=newest_batch(store),
        uncommitted_files=sum(1 for p in on_disk if p not in committed and p not in compacting),
    )


def _partition_table(report: ArchiveReport) -> Table:
    out = Table(title=f"archive {report.table}", title_justify="left")
    for column in ("partition", "journal offsets", "archived", "lag", "missing", "duplicates", "ok"):
        out.add_column(column, justify="right")
    for p in report.check.partitions:
        span = f"{p.journal.low:,}..{p.journal.high:,}" if p.journal else "-"
        out.add_row(
            str(p.partition), span, f"{p.archived:,}", f"{p.lag:,}", f"{p.missing:,}", f"{p.duplicates:,}",
            "[green]yes[/]" if p.ok else "[red]NO[/]",
        )  # fmt: skip
    return out


def _summary(report: ArchiveReport) -> str:
    return (
        f"{report.files:,} files, {report.bytes / 1e6:,.1f} MB, {report.days} days, newest micro-batch "
        f"{report.newest_batch if report.newest_batch is not None else '-'}; lag {report.check.lag:,} facts"
        + (f"; {report.uncommitted_files} uncommitted files (ignored)" if report.uncommitted_files else "")
    )


@archive_app.command("verify")
def archive_verify(
    table: TableOption = None,
    complete: Annotated[bool, typer.Option(help="Fail also if the archive lags the journal")] = False,
    home: Home = DEFAULT_HOME,
) -> None:
    """Per journal partition: the archived offsets equal the journal's (for the range it still holds),
    nothing missing, nothing twice. Exit 0 if so, 1 if not."""
    with needs("archive verify"):
        from hearth_analytics.archive_files.archive_table import journal_ranges
    store = open_table(table_path(table, home))
    report = inspect_archive(store, asyncio.run(journal_ranges(StackSettings())), complete=complete)
    console.print(_partition_table(report))
    console.print(_summary(report))
    problems = report.check.problems()
    if problems:
        for line in problems:
            console.print(f"[red]{line}[/]")
        raise typer.Exit(1)
    console.print("[green]The archive holds every journal fact it covers, once.[/]")


@archive_app.command("status")
def archive_status(table: TableOption = None, home: Home = DEFAULT_HOME) -> None:
    """Lag behind the journal, the table's size and files."""
    with needs("archive status"):
        from hearth_analytics.archive_files.archive_table import journal_ranges
    store = open_table(table_path(table, home))
    report = inspect_archive(store, asyncio.run(journal_ranges(StackSettings())))
    console.print(_summary(report))
    if not report.files:
        raise typer.Exit(1)


@archive_app.command("compact")
def archive_compact(
    table: TableOption = None,
    before: Annotated[
        str | None, typer.Option(help="Compact days before this one (YYYY-MM-DD; default: today, UTC)")
    ] = None,
    min_files: Annotated[int, typer.Option(min=2, help="Compact a day only from this many files")] = 2,
    grace: Annotated[
        float, typer.Option(min=0, help="Seconds a replaced file is kept for readers still reading it")
    ] = 600.0,
    home: Home = DEFAULT_HOME,
) -> None:
    """Rewrite each closed day's small files as one file (sorted by journal partition and offset), safely
    while the archive job runs; delete files replaced more than --grace seconds ago."""
    with needs("archive compact"):
        from hearth_analytics.archive_files.archive_compact import compact_archive
    store = open_table(table_path(table, home))
    try:
        day = date.fromisoformat(before) if before else None
    except ValueError as exc:
        raise typer.BadParameter(f"{before!r} is not a date (YYYY-MM-DD)", param_hint="--before") from exc
    result = compact_archive(store, before=day, min_files=min_files, grace_s=grace)
    if result.compact_log is None:
        console.print("Nothing to compact yet: the archive job has written no .compact log file.")
    out = Table(title=f"compacted {store.url}", title_justify="left")
    for column in ("day", "files", "rows", "MB before", "MB after"):
        out.add_column(column, justify="right")
    for d in result.days:
        before_mb, after_mb = f"{d.bytes_before / 1e6:,.2f}", f"{d.bytes_after / 1e6:,.2f}"
        out.add_row(d.day, f"{d.files:,}", f"{d.rows:,}", before_mb, after_mb)
    if result.days:
        console.print(out)
    elif result.compact_log is not None:
        console.print("No closed day has more than one file in the newest .compact log file.")
    if result.undone:
        console.print("[yellow]The archive job wrote its next .compact log from the old one meanwhile; "
                      "the table is whole, run compact again.[/]")  # fmt: skip
    console.print(f"deleted {result.purged:,} files replaced earlier")
