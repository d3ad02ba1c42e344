"""Analytics settings, env prefix ``HEARTH_ANALYTICS_`` (the broker and topics come from ``stack``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from hearth_shared.adapters.archive_store import S3Access
from hearth_shared.adapters.settings import StackSettings


class AnalyticsSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HEARTH_ANALYTICS_", extra="ignore")

    # --- Spark
    master: str | None = Field(
        None,
        description="Spark master URL; None: the one spark-submit was given, else local[2]",
    )
    shuffle_partitions: int = Field(
        2,
        gt=0,
        description="spark.sql.shuffle.partitions (frozen into a streaming checkpoint at first start)",
    )
    driver_memory: str = "2g"
    cores_max: int | None = Field(
        None, gt=0, description="spark.cores.max on a cluster (None: all the cores the cluster offers)"
    )
    spark_ui: bool = False
    kafka_jars: Literal["auto", "local", "packages"] = Field(
        "auto",
        description="How the Kafka connector reaches Spark: 'local' = jars resolved once with mvn, passed "
        "as spark.jars; 'packages' = spark.jars.packages (Ivy, at start-up); 'auto': local for local[*]",
    )
    connector_version: str | None = Field(
        None, description="spark-sql-kafka-0-10 version; None: PySpark's own if Maven Central has it"
    )
    jars_dir: Path | None = Field(None, description="Where resolved jars are cached; None: <repo>/.hearth")

    # --- where things go
    checkpoint_dir: Path = Path(".hearth/analytics/checkpoints")
    output_dir: Path = Path(".hearth/analytics/reports")

    # --- streaming rollups
    allowed_lateness_s: int = Field(120, ge=0, description="Watermark delay: max event time seen minus this")
    retention_s: int = Field(
        1800, ge=0, description="How long a closed window is kept so late events can still be counted on it"
    )
    rollup_trigger_s: float = Field(10.0, gt=0, description="Micro-batch interval of the rollup query")
    train_trigger_s: float = Field(60.0, gt=0, description="Micro-batch interval of the training query")
    rollup_max_offsets_per_trigger: int | None = Field(
        300_000,  # 100,000 capped the query at 10,000 records/s with its batches done in 3.6 s (bench stream)
        gt=0,
        description="Journal records per rollup micro-batch at most: a replay of a long journal moves the "
        "watermark (and evicts closed windows) every so many records instead of holding all its windows",
    )
    train_max_offsets_per_trigger: int | None = Field(
        None, gt=0, description="Journal records per training micro-batch at most (each publishes a model)"
    )

    # --- anomaly model
    model_threshold: float = Field(4.0, gt=0, description="z-score above which a reading is an anomaly")
    model_min_count: int = Field(30, gt=0, description="Readings a slice needs before scoring trusts it")

    # --- the journal's archive (hearth_analytics.jobs.archive)
    archive_url: str = Field(
        ".hearth/analytics/archive",
        description="Where the archive table lives: a local directory, or s3a://bucket/path",
    )
    archive_trigger_s: float = Field(30.0, gt=0, description="Micro-batch interval of the archive query")
    archive_max_offsets_per_trigger: int | None = Field(
        500_000, gt=0, description="Journal records per archive micro-batch at most"
    )
    archive_compact_every_s: float = Field(
        3600.0,
        ge=0,
        description="How often the archive job compacts closed days' small files (hearth_analytics."
        "archive_compact; local or s3a://); 0: never (then `hearth archive compact` does it)",
    )
    # --- the archive on S3-compatible storage (hearth_analytics.s3; only for an s3a:// archive_url)
    s3_endpoint: str | None = Field(None, description="e.g. http://127.0.0.1:9000; None: AWS S3")
    s3_region: str | None = None
    s3_access_key: str | None = None
    s3_secret_key: SecretStr | None = None
    s3_path_style: bool = Field(True, description="bucket in the path, not the host (S3-compatible servers)")

    stack: StackSettings = Field(default_factory=StackSettings)

    def checkpoint(self, query: str) -> Path:
        return (self.checkpoint_dir / query).resolve()

    def archive_is_local(self) -> bool:
        return "://" not in self.archive_url or self.archive_url.startswith("file://")

    def archive_location(self) -> str:
        """The archive table's URL as Spark takes it (a local directory made absolute)."""
        if not self.archive_is_local():
            return self.archive_url
        return str(Path(self.archive_url.removeprefix("file://")).resolve())

    def archive_checkpoint(self) -> str:
        return str(self.checkpoint("archive"))

    def s3_access(self) -> S3Access:
        """The S3 settings for pyarrow's client (compaction, readers without Spark)."""
        return S3Access(
            endpoint=self.s3_endpoint,
            region=self.s3_region,
            access_key=self.s3_access_key,
            secret_key=self.s3_secret_key,
            path_style=self.s3_path_style,
        )
