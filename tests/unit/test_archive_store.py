"""Where the archive table is (``archive_store``): a local directory or an ``s3a://`` prefix, and the file
sink's log URIs translated to paths on its filesystem and back; a URL of another kind, or a log entry
naming a file on another store, is refused; a directory that appears while it is listed lists as none."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pyarrow.fs as pafs
import pytest
from pydantic import SecretStr

from hearth_shared.adapters.archive_store import LOCAL, ArchiveStore, ArchiveUnreadable, S3Access, open_store

pytestmark = pytest.mark.unit


def test_a_local_table_reads_the_sinks_file_uris(tmp_path: Path) -> None:
    store = open_store(tmp_path / "archive")
    assert store.is_local and store.url == store.root == str((tmp_path / "archive").resolve())
    path = store.join("day=2026-11-20", "part-0.parquet")
    assert store.path_of(f"file:{path}") == store.path_of(store.uri(path)) == path  # Spark writes file:/...
    assert open_store(f"file://{tmp_path}/archive").root == store.root
    with pytest.raises(ArchiveUnreadable):
        store.path_of("s3a://bucket/journal/day=2026-11-20/part-0.parquet")


def test_an_s3a_table_is_a_bucket_and_prefix() -> None:
    access = S3Access(endpoint="http://127.0.0.1:9000", access_key="k", secret_key=SecretStr("s"))
    store = open_store("s3a://bucket/journal/", access)
    assert not store.is_local and (store.root, store.url) == ("bucket/journal", "s3a://bucket/journal")
    uri = "s3a://bucket/journal/day=2026-11-20/part-0.parquet"
    assert store.path_of(uri) == "bucket/journal/day=2026-11-20/part-0.parquet"
    assert store.uri(store.path_of(uri)) == uri
    with pytest.raises(ArchiveUnreadable):
        store.path_of("file:/tmp/part-0.parquet")
    with pytest.raises(ArchiveUnreadable):
        open_store("https://bucket.example.com/journal")


class _CreatedWhileListed:
    """pyarrow's local filesystem when the directory appears between its listing, which found none, and
    its second look, which finds it: it raises."""

    def get_file_info(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        raise FileNotFoundError(
            f"Cannot list directory '{selector.base_dir}'. Detail: [errno 2] No such file"
        )


def test_a_directory_that_appears_while_it_is_listed_lists_as_none() -> None:
    store = ArchiveStore(cast(pafs.FileSystem, _CreatedWhileListed()), "/table", LOCAL)
    assert store.listing("/table/_spark_metadata") == []
