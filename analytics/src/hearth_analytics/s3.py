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

from hearth_analytics.settings import AnalyticsSettings

HADOOP_AWS = "org.apache.hadoop:hadoop-aws"


def hadoop_aws(hadoop_version: str) -> str:
    """The s3a connector's Maven coordinates at Spark's Hadoop version."""
    return f"{HADOOP_AWS}:{hadoop_version}"


def s3a_coordinates(settings: AnalyticsSettings, hadoop_version: str) -> str | None:
    """``hadoop-aws`` at Spark's Hadoop version for an s3a:// archive (None: a local archive)."""
    return None if settings.archive_is_local() else hadoop_aws(hadoop_version)


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
