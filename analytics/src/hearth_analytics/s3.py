"""The archive on S3-compatible storage: Hadoop's s3a connector, its jars and its settings.

Used only when ``archive_url`` is an ``s3a://bucket/path`` URL (``settings.archive_is_local()`` is
false); a local archive needs nothing from here.

* Jars: ``org.apache.hadoop:hadoop-aws`` at exactly the Hadoop version PySpark ships
  (``hadoop-client-api-<version>.jar`` in its jars; 3.5.0 for PySpark 4.3.0; hadoop-aws must match
  its Hadoop), with its runtime dependencies (the AWS SDK v2 ``bundle``, about 690 MB, and the
  analytics accelerator), resolved once with ``mvn`` into
  ``<repo>/.hearth/spark-jars/<spark version>/hadoop-aws-<version>/`` like the Kafka connector
  (``spark.resolve_into``), or as ``spark.jars.packages`` for a cluster master.
* Settings (``HEARTH_ANALYTICS_S3_*``): the endpoint (for a non-AWS server: MinIO, Ceph, moto...), the
  access key and secret, the region, path-style access (the default: most S3-compatible servers need
  it). They become ``spark.hadoop.fs.s3a.*``; without a key pair s3a's default credential chain
  (environment, instance profile) applies.
"""

from __future__ import annotations

from pathlib import Path

from hearth_analytics.settings import AnalyticsSettings

HADOOP_AWS = "org.apache.hadoop:hadoop-aws"


def hadoop_version() -> str:
    """The Hadoop version PySpark ships (from its ``hadoop-client-api`` jar)."""
    from hearth_analytics.spark import _spark_jar_names

    prefix = "hadoop-client-api-"
    for name in _spark_jar_names():
        if name.startswith(prefix):
            return name[len(prefix) : -len(".jar")]
    raise RuntimeError("PySpark ships no hadoop-client-api jar: cannot tell its Hadoop version")


def s3a_jars(settings: AnalyticsSettings, *, local: bool) -> list[Path | str]:
    """The s3a connector's jars (``local``) or its Maven coordinates (for ``spark.jars.packages``);
    nothing for a local archive."""
    if settings.archive_is_local():
        return []
    coordinates = f"{HADOOP_AWS}:{hadoop_version()}"
    if not local:
        return [coordinates]
    from hearth_analytics.spark import SPARK_VERSION, jars_root, resolve_into

    target = jars_root(settings) / "spark-jars" / SPARK_VERSION / f"hadoop-aws-{hadoop_version()}"
    if (target / ".complete").exists():
        return list(sorted(target.glob("*.jar")))
    print(f"resolving {coordinates} from Maven Central (once; the AWS SDK is about 690 MB)...")
    return list(resolve_into(coordinates, target))


def s3a_conf(settings: AnalyticsSettings) -> dict[str, str]:
    """``spark.hadoop.fs.s3a.*`` for the archive's object store (empty for a local archive)."""
    if settings.archive_is_local():
        return {}
    prefix = "spark.hadoop.fs.s3a."
    conf = {
        f"{prefix}impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        f"{prefix}path.style.access": str(settings.s3_path_style).lower(),
    }
    if settings.s3_endpoint:
        conf[f"{prefix}endpoint"] = settings.s3_endpoint
        conf[f"{prefix}connection.ssl.enabled"] = str(settings.s3_endpoint.startswith("https")).lower()
    if settings.s3_region:
        conf[f"{prefix}endpoint.region"] = settings.s3_region
    if settings.s3_access_key and settings.s3_secret_key:
        conf[f"{prefix}access.key"] = settings.s3_access_key
        conf[f"{prefix}secret.key"] = settings.s3_secret_key.get_secret_value()
        conf[f"{prefix}aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    return conf
