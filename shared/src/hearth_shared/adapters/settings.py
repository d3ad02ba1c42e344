"""Settings every service shares (where the broker, database and cache are). Env prefix ``HEARTH_``.

Each service has its own settings class with its own prefix that holds one of these as ``stack``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hearth_shared.adapters.topics import Topics
from hearth_shared.schema.ids import is_identifier
from hearth_shared.schema.shards import DEFAULT_SHARD


class MqttShard(BaseModel, frozen=True):
    """One MQTT broker shard (``hearth_shared.schema.shards``): where its devices connect (handed to them in
    their credentials' ``mqtt_url``) and where the platform's own parts connect (its gateways, its
    broker-access follower, the simulator's hub for it)."""

    device_url: str = Field(description="The devices' listener, e.g. mqtt://127.0.0.1:1883")
    platform_url: str = Field(description="The service accounts' listener, e.g. mqtt://127.0.0.1:1884")


class StackSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HEARTH_", extra="ignore", frozen=True)

    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    kafka_replication_factor: int = Field(
        1,
        ge=1,
        description="Replicas of every topic Hearth creates (its own and faust's changelogs); 3 on a "
        "3-broker cluster, with min.insync.replicas 2",
    )
    topic_prefix: str = "hearth"
    postgres_dsn: str = "postgresql+psycopg://hearth@127.0.0.1:5432/hearth"
    redis_url: str = "redis://127.0.0.1:6379/0"
    token_secret: str = Field(default="", description="HMAC secret that signs and checks API tokens")
    journal_retention_s: int | None = Field(
        None,
        gt=0,
        description="How long the journal topic keeps facts; None (the default): for ever. Set a window "
        "only with the archive verified (`hearth archive verify`): the archive then holds the history",
    )

    snapshot_every_s: float = Field(
        60.0,
        gt=0,
        description="How often a part that folds topics into memory saves a snapshot of its state while "
        "it reads (hearth_shared.adapters.topic_follower): what a restart reads again is at most about "
        "this long",
    )

    mqtt_shards: dict[str, MqttShard] | None = Field(
        None,
        description='The MQTT broker shards by name, as JSON: {"0": {"device_url": ..., '
        '"platform_url": ...}, "1": ...}. A new device gets one of them (a stable hash of its id over '
        "the names in this order), recorded at its registration. None (the default): one broker, shard "
        f"{DEFAULT_SHARD!r}, at the addresses each service's own settings name",
    )

    @field_validator("mqtt_shards")
    @classmethod
    def _shard_names(cls, shards: dict[str, MqttShard] | None) -> dict[str, MqttShard] | None:
        if shards is None:
            return None
        if DEFAULT_SHARD not in shards:
            raise ValueError(
                f"the shard list needs a shard named {DEFAULT_SHARD!r}: devices registered before shards "
                "existed are on it"
            )
        if bad := [name for name in shards if not is_identifier(name)]:
            raise ValueError(f"shard names must be identifiers: {bad}")
        return shards

    @property
    def topics(self) -> Topics:
        retention_ms = self.journal_retention_s * 1000 if self.journal_retention_s is not None else None
        return Topics(self.topic_prefix, self.kafka_replication_factor, retention_ms)
