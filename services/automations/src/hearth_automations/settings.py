"""Automations service settings, env prefix ``HEARTH_AUTOMATIONS_``.

Scaling by home: ``instances`` processes, each with its own ``instance`` (0 .. instances-1), each owning
the homes whose home-journal partition (murmur2 of the home id, as Kafka places them) modulo
``instances`` is its ``instance``. Two processes with the same ``instance`` are harmless (every command
id is derived, the device actor records one), merely wasteful.
"""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain.room_response import CAP_S


class AutomationsSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HEARTH_AUTOMATIONS_", extra="ignore")

    instance: int = Field(0, ge=0, description="This process's share of the homes (0 .. instances-1)")
    instances: int = Field(1, ge=1, description="How many processes share the homes")
    tick_s: float = Field(0.25, gt=0, le=10, description="How often due transitions are looked for")
    command_expires_in_s: float = Field(
        300.0, gt=0, description="A scheduled command's deadline (a device offline longer misses it)"
    )
    preheat_max_s: int = Field(
        CAP_S, ge=0, le=12 * 3600,
        description="A preheat transition starts at most this long before its time (its lead is capped)",
    )  # fmt: skip
    heartbeat_file: str = Field(
        ".hearth/automations.heartbeat", description="Touched every tick once live; the probe reads it"
    )
    webhook_attempts: int = Field(6, ge=1, description="Tries per notification before a gave_up fact")
    webhook_backoff_s: float = Field(
        0.5, gt=0, description="The first retry's wait; it doubles (with jitter)"
    )
    webhook_max_backoff_s: float = Field(60.0, gt=0)
    webhook_timeout_s: float = Field(10.0, gt=0)
    # A poll's sends wait for its last record; a bigger poll pays the two round trips less often. Polls
    # are small while the engine keeps up (what arrived since the last one); the cap binds only behind.
    poll_records: int = Field(
        5000, ge=1, le=100_000,
        description="Journal records per poll at most; then their commands and run facts are sent together",
    )  # fmt: skip
    default_automations: bool = Field(
        True, description="Give every home the corrective automations (hearth_automations.service.defaults)"
    )
    log_level: str = "info"
    stack: StackSettings = Field(default_factory=StackSettings)

    @model_validator(mode="after")
    def instance_in_range(self) -> AutomationsSettings:
        if self.instance >= self.instances:
            raise ValueError(f"instance {self.instance} must be below instances ({self.instances})")
        return self
