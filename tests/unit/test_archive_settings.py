"""The archive's settings: a local directory by default, s3a:// with the object store's settings as
``spark.hadoop.fs.s3a.*`` (and the hadoop-aws version that matches PySpark's Hadoop)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hearth_analytics.s3 import s3a_conf
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.spark import hadoop_version, s3a_jars

pytestmark = pytest.mark.unit


def test_local_archive_needs_no_s3a(tmp_path: Path) -> None:
    settings = AnalyticsSettings(archive_url=str(tmp_path / "a"))
    assert settings.archive_is_local() and settings.archive_location() == str((tmp_path / "a").resolve())
    assert s3a_conf(settings) == {} and s3a_jars(settings, local=True) == []
    relative = AnalyticsSettings(archive_url="file://rel/dir")
    assert relative.archive_location() == str(Path("rel/dir").resolve())


def test_s3a_archive_gets_endpoint_keys_and_the_matching_hadoop_aws() -> None:
    settings = AnalyticsSettings(
        archive_url="s3a://bucket/journal", s3_endpoint="http://127.0.0.1:9000",
        s3_access_key="key", s3_secret_key="s3cr3t-value",
    )  # fmt: skip
    assert not settings.archive_is_local() and settings.archive_location() == "s3a://bucket/journal"
    conf = s3a_conf(settings)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "key"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "s3cr3t-value"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert "s3cr3t-value" not in repr(settings)  # the secret stays out of logs
    version = hadoop_version()
    assert version.split(".")[0] == "3"
    assert s3a_jars(settings, local=False) == [f"org.apache.hadoop:hadoop-aws:{version}"]
