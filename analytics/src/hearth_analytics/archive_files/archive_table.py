"""Reading the archive table without Spark: its committed files (``hearth_shared.adapters.archive_log``, the
file sink's commit log), as pyarrow (or DuckDB) reads them, locally or on S3
(``hearth_shared.adapters.archive_store``).

No Spark here (so the ``hearth archive`` commands start in a second): the standard library and pyarrow.
The archive's two layouts (``archive_layout``) share the columns read here (``kafka_partition``,
``kafka_offset``, ``value``), so both are read the same way.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds
from aiokafka import AIOKafkaConsumer

from hearth_analytics.archive_files.archive_check import OffsetRange
from hearth_shared.adapters.archive_log import (
    METADATA_DIR,
    ArchiveUnreadable,
    CommittedFile,
    Table,
    committed_files,
    newest_batch,
)
from hearth_shared.adapters.archive_store import as_store
from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.adapters.settings import StackSettings

__all__ = [
    "METADATA_DIR",
    "ArchiveUnreadable",
    "CommittedFile",
    "committed_files",
    "dataset",
    "journal_ranges",
    "newest_batch",
    "read_columns",
]


def dataset(table: Table, files: list[CommittedFile] | None = None) -> ds.Dataset:
    """The committed files as one pyarrow dataset, with the ``day`` partition column from their paths."""
    store = as_store(table)
    chosen = committed_files(store) if files is None else files
    return ds.dataset(
        [f.path for f in chosen],
        format="parquet",
        filesystem=store.fs,
        partitioning=ds.partitioning(pa.schema([("day", pa.date32())]), flavor="hive"),
        partition_base_dir=store.root,
    )


def read_columns(table: Table, columns: list[str]) -> pa.Table:
    """Those columns of every committed row (columns both layouts have)."""
    store = as_store(table)
    files = committed_files(store)
    if not files:
        return pa.table({name: pa.array([], pa.null()) for name in columns})
    return dataset(store, files).to_table(columns=columns)


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
