"""Device gateway settings, env prefix ``HEARTH_DEVICE_GATEWAY_``.

The gateways of one broker take its devices in ``slices`` (each gateway its own ``slice``, so each device's
messages go through one of them, in order: service/slices.py) and share ``consumer_group`` (the Kafka
consumer group of the device-bound topic, so each dispatched command is published by one of them).
``instance`` must be unique
per process and stable across its restarts: it names the process's persistent MQTT sessions, so messages
the broker handed to a gateway that was killed before acknowledging them come back when it restarts.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.schema.mqtt import GATEWAY_ACCOUNT, PLATFORM_PORT
from hearth_shared.schema.shards import DEFAULT_SHARD


class DeviceGatewaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HEARTH_DEVICE_GATEWAY_", extra="ignore")

    mqtt_host: str = "127.0.0.1"
    mqtt_port: int = Field(PLATFORM_PORT, gt=0, lt=65536, description="The broker's platform listener")
    mqtt_username: str = Field(GATEWAY_ACCOUNT, description="The broker account of Hearth's own components")
    mqtt_password: str = ""
    mqtt_keepalive_s: int = Field(10, gt=0)
    mqtt_session_expiry_s: int = Field(
        3600, ge=0, description="How long the broker keeps messages for a gateway that went away"
    )
    shard: str = Field(
        DEFAULT_SHARD,
        pattern=IDENTIFIER_PATTERN,
        description="The MQTT broker shard this gateway serves (its broker is mqtt_host:mqtt_port): it "
        "publishes only the commands of that shard's devices",
    )
    instance: str = Field("gateway-1", pattern=IDENTIFIER_PATTERN, description="Unique, stable per process")
    consumer_group: str | None = Field(None, description="Kafka group; None: '<topic prefix>-device-gateway'")
    batch_size: int = Field(5000, gt=0, description="Device messages put on the inbox in one batch at most")
    linger_ms: float = Field(2.0, ge=0, description="How long a batch waits for more messages")
    receive_maximum: int = Field(
        20000, gt=0, lt=65536, description="Device messages the broker may have in flight to this process"
    )
    slices: int = Field(
        1,
        ge=1,
        description="The gateways on this broker: each takes the devices of its slice, so a device's "
        "messages stay in order (service/slices.py); 1: this gateway takes every device",
    )
    slice: int = Field(0, ge=0, description="This gateway's slice, 0 .. slices - 1")
    log_level: str = "info"
    stack: StackSettings = Field(default_factory=StackSettings)

    def kafka_group(self) -> str:
        """Each shard's gateways are a consumer group of their own: every group reads every dispatched
        command and publishes its shard's (the default shard's keeps the name it had before shards)."""
        if self.consumer_group:
            return self.consumer_group
        suffix = "" if self.shard == DEFAULT_SHARD else f"-shard-{self.shard}"
        return f"{self.stack.topic_prefix}-device-gateway{suffix}"


class BrokerAccessSettings(BaseSettings):
    """Env prefix ``HEARTH_BROKER_ACCESS_``; where the broker keeps its access files and its pid."""

    model_config = SettingsConfigDict(env_prefix="HEARTH_BROKER_ACCESS_", extra="ignore")

    shard: str = Field(
        DEFAULT_SHARD,
        pattern=IDENTIFIER_PATTERN,
        description="The MQTT broker shard whose broker this follower keeps: only its devices' credentials",
    )
    access_dir: Path = Field(Path(".hearth/data/mosquitto/access"), description="passwd, acl, services.*")
    pid_file: Path = Field(Path(".hearth/data/mosquitto/mosquitto.pid"), description="The broker's pid file")
    poll_ms: int = Field(
        100, gt=0, description="How long one journal poll waits; at most one reload per poll"
    )
    # Where no launcher writes services.passwd (compose): the service accounts' secrets, hashed on start.
    gateway_password: str = ""
    simulator_password: str = ""
    # The follower's own MQTT connection (service/availability_keeper.py), on the platform listener with the
    # gateway's account; the password defaults to ``gateway_password``. No password: no connection.
    mqtt_host: str = "127.0.0.1"
    mqtt_port: int = Field(PLATFORM_PORT, gt=0, lt=65536)
    mqtt_username: str = GATEWAY_ACCOUNT
    mqtt_password: str = ""
    stack: StackSettings = Field(default_factory=StackSettings)

    def follower_name(self) -> str:
        """The follower's snapshot and restart-report name: one per broker, which its platform listener
        names (a stack with two brokers runs two followers, each saving the fold it applied to its own
        broker; the snapshots topic is the stack's already)."""
        return f"broker-access-{self.mqtt_host}-{self.mqtt_port}"
