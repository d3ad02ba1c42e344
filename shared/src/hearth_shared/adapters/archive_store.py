"""Where the archive table is: a local directory or an ``s3a://bucket/path`` prefix, behind one pyarrow
filesystem, so the commit log (``archive_log``), compaction, ``hearth archive`` and ``hearth rebuild
--from-archive`` read and write either the same way.

* ``open_store(url, s3)``: a local path (or ``file://`` URL) gives pyarrow's ``LocalFileSystem``; an
  ``s3a://`` URL (Hadoop's name, the one the Spark job writes to) gives its ``S3FileSystem`` with the
  endpoint, keys, region and path style of ``S3Access`` (``HEARTH_ANALYTICS_S3_*``, the variables the
  Spark job reads too: one set of settings for both).
* Paths on the store are the filesystem's (``/abs/dir/day=.../part-...parquet`` locally,
  ``bucket/path/day=.../part-...parquet`` on S3); the file sink's log names files by URI (``file:/...``,
  ``s3a://...``): ``path_of`` and ``uri`` translate.
* ``write_whole``: a file a reader sees whole or not at all. Locally a hidden temporary file, fsynced,
  renamed over the target; on S3 one upload (an object appears only when its upload completes, and a
  PUT over an existing key replaces it at once: S3 is strongly consistent), so no rename is needed.

No Spark, no Hadoop: pyarrow's own S3 client, so the CLI and the read models' rebuild need no JVM.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

LOCAL, S3A = "file", "s3a"


class ArchiveUnreadable(RuntimeError):
    """The table's commit log is missing or malformed, or the table is not where it can be read."""


class S3Access(BaseSettings):
    """How to reach an S3-compatible store (``HEARTH_ANALYTICS_S3_*``; ``AnalyticsSettings`` has the
    same variables for Spark's s3a connector)."""

    model_config = SettingsConfigDict(env_prefix="HEARTH_ANALYTICS_S3_", extra="ignore")

    endpoint: str | None = Field(None, description="e.g. http://127.0.0.1:9000; None: AWS S3")
    region: str | None = None
    access_key: str | None = None
    secret_key: SecretStr | None = None
    path_style: bool = Field(True, description="bucket in the path, not the host (S3-compatible servers)")


def s3_filesystem(access: S3Access) -> pafs.S3FileSystem:
    """pyarrow's S3 client for ``access`` (without a key pair: the AWS default credential chain)."""
    options: dict[str, Any] = {"force_virtual_addressing": not access.path_style}
    if access.endpoint:
        endpoint = urlparse(access.endpoint)
        options["endpoint_override"] = endpoint.netloc or access.endpoint
        options["scheme"] = endpoint.scheme or "https"
    if access.region:
        options["region"] = access.region
    if access.access_key and access.secret_key:
        options["access_key"] = access.access_key
        options["secret_key"] = access.secret_key.get_secret_value()
    return pafs.S3FileSystem(**options)


@dataclass(frozen=True)
class ArchiveStore:
    """The table's filesystem and the table's path on it (picklable: a rebuild sends it to its children)."""

    fs: pafs.FileSystem
    root: str  # the table's directory (local) or key prefix with its bucket (S3), no trailing slash
    scheme: str  # LOCAL or S3A: how the file sink's log names the table's files

    @property
    def is_local(self) -> bool:
        return self.scheme == LOCAL

    @property
    def url(self) -> str:
        """The table as Spark and the operator name it."""
        return self.root if self.is_local else f"{self.scheme}://{self.root}"

    def join(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def path_of(self, uri: str) -> str:
        """A log entry's file URI as a path on this store."""
        parsed = urlparse(uri)
        if self.is_local:
            if parsed.scheme not in ("", "file"):
                raise ArchiveUnreadable(f"{uri}: a local table's log names a file elsewhere")
            return unquote(parsed.path)
        if parsed.scheme not in ("s3a", "s3"):
            raise ArchiveUnreadable(f"{uri}: an S3 table's log names a file elsewhere")
        return unquote(parsed.netloc + parsed.path)

    def uri(self, path: str) -> str:
        """A path on this store as the file sink's log names it."""
        return Path(path).as_uri() if self.is_local else f"{self.scheme}://{path}"

    def exists(self, path: str) -> bool:
        return bool(self.fs.get_file_info(path).type != pafs.FileType.NotFound)

    def listing(self, directory: str, *, recursive: bool = False) -> list[pafs.FileInfo]:
        """The files (and directories) under ``directory``; empty if there is none.

        Also empty when the directory appears while it is listed: pyarrow's local listing, finding no
        directory, looks again whether it exists and raises if it does by then (Spark's sink creating
        ``_spark_metadata`` just then: seen once in a fresh clone's run of
        ``test_archive_exactly_once_across_kill_and_verify``). There was none when it was listed."""
        selector = pafs.FileSelector(directory, allow_not_found=True, recursive=recursive)
        try:
            return list(self.fs.get_file_info(selector))
        except FileNotFoundError:
            return []

    def read_text(self, path: str) -> str:
        with self.fs.open_input_stream(path) as stream:
            return bytes(stream.read()).decode()

    def write_whole(self, path: str, text: str) -> None:
        """Write ``path`` so that a reader sees the old file or the new one, whole (module docstring)."""
        if not self.is_local:
            with self.fs.open_output_stream(path) as out:
                out.write(text.encode())
            return
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        with open(temporary, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)


def open_store(table: str | Path, s3: S3Access | None = None) -> ArchiveStore:
    """The store of ``table``: a local directory (or ``file://`` URL), or ``s3a://bucket/path``."""
    text = str(table)
    if "://" not in text or text.startswith("file:"):
        local = unquote(urlparse(text).path) if text.startswith("file:") else text
        return ArchiveStore(pafs.LocalFileSystem(), str(Path(local).resolve()), LOCAL)
    parsed = urlparse(text)
    if parsed.scheme not in ("s3a", "s3") or not parsed.netloc:
        raise ArchiveUnreadable(f"{text}: an archive is a local directory or an s3a://bucket/path URL")
    return ArchiveStore(s3_filesystem(s3 or S3Access()), (parsed.netloc + parsed.path).rstrip("/"), S3A)


def as_store(table: ArchiveStore | str | Path) -> ArchiveStore:
    """``table`` as a store (a path or URL is opened with the S3 settings of the environment)."""
    return table if isinstance(table, ArchiveStore) else open_store(table)
