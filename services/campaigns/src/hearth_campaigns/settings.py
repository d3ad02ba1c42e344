"""Campaign driver settings, env prefix ``HEARTH_CAMPAIGNS_``."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from hearth_shared.adapters.settings import StackSettings


class CampaignSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HEARTH_CAMPAIGNS_", extra="ignore")

    tick_s: float = Field(0.5, gt=0, description="How often running campaigns are advanced")
    log_level: str = "info"
    stack: StackSettings = Field(default_factory=StackSettings)

    def consumer_group(self) -> str:
        """The group that holds the campaign requests' offsets."""
        return f"hearth-campaigns-{self.stack.topic_prefix}"
