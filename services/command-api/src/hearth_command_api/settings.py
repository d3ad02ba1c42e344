"""Command API settings, env prefix ``HEARTH_COMMAND_API_`` (where the stack is: ``HEARTH_...``)."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.shards import DEFAULT_SHARD
from hearth_shared.web.http_errors import DEFAULT_MAX_BODY_BYTES

# A command's longest deadline (max_expires_in_s) spans at most this many command windows.
MAX_DEADLINE_WINDOWS = 64


class CommandApiSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HEARTH_COMMAND_API_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8000
    default_expires_in_s: float = Field(30.0, gt=0, description="A command's deadline when none is given")
    max_expires_in_s: float = 24 * 3600
    max_wait_s: float = 60.0
    command_window_s: float = Field(
        24 * 3600.0,
        gt=0,
        description="How long after a command finished its Idempotency-Key and ?wait= still answer it "
        "(and it stays in memory); a retry after that is a new command",
    )
    max_body_bytes: int = Field(
        DEFAULT_MAX_BODY_BYTES, ge=0, description="Request bodies over this many bytes get 413, unread"
    )
    mqtt_url: str = Field(
        "mqtt://127.0.0.1:1883",
        description="The broker URL handed to devices with credentials when there is one broker "
        "(HEARTH_MQTT_SHARDS unset); with shards, each shard's device_url",
    )
    credentials_wait_s: float = Field(
        10.0,
        ge=0,
        description="How long an answer with new credentials (registration, rotation, shard move) waits "
        "for the device's broker to have loaded them, so the device can connect at once; past it the "
        "answer comes anyway (its broker-access follower is down or slow)",
    )
    stack: StackSettings = Field(default_factory=StackSettings)
    cors_origins: list[str] = Field(
        default=["http://127.0.0.1:8001", "http://localhost:8001"],
        description="Origins whose pages may call this API from a browser (the query API's live page)",
    )

    def shard_urls(self) -> dict[str, str]:
        """Each MQTT shard's device URL, by name, in the configured order (the order assignment uses)."""
        shards = self.stack.mqtt_shards
        if shards is None:
            return {DEFAULT_SHARD: self.mqtt_url}
        return {name: shard.device_url for name, shard in shards.items()}

    @model_validator(mode="after")
    def window_spans_few_generations(self) -> Self:
        """A retry looks for its command in every window generation a command may live through (its
        deadline, then the window): at most ``MAX_DEADLINE_WINDOWS`` windows, so a few lookups."""
        if self.max_expires_in_s > MAX_DEADLINE_WINDOWS * self.command_window_s:
            raise ValueError(
                f"command_window_s ({self.command_window_s:g}) must be at least max_expires_in_s / "
                f"{MAX_DEADLINE_WINDOWS} ({self.max_expires_in_s / MAX_DEADLINE_WINDOWS:g} s)"
            )
        return self
