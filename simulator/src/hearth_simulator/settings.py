"""``python -m hearth_simulator`` settings, env prefix ``HEARTH_SIMULATOR_`` (see ``FleetOptions``)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.mqtt import PLATFORM_PORT
from hearth_shared.schema.shards import DEFAULT_SHARD
from hearth_simulator.firmware import FirmwareOptions
from hearth_simulator.fleet import MqttEndpoint
from hearth_simulator.options import FleetOptions


class SimulatorSettings(BaseSettings):
    """``python -m hearth_simulator`` settings, env prefix ``HEARTH_SIMULATOR_`` (see ``FleetOptions``)."""

    model_config = SettingsConfigDict(env_prefix="HEARTH_SIMULATOR_", extra="ignore")

    rate: float = Field(1.0, gt=0, description="Telemetry reports per second per device")
    offline_fraction: float = Field(0.0, ge=0, lt=1)
    ack_delay_s: float = Field(0.0, ge=0)
    lost_ack_fraction: float = Field(0.0, ge=0, le=1)
    duplicate_fraction: float = Field(0.0, ge=0, le=1)
    reorder_fraction: float = Field(0.0, ge=0, le=1)
    drifting_ids: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Comma-separated thermostat ids whose reading drifts"
    )
    drifting_fraction: float = Field(0.0, ge=0, le=1)
    jam_probability: float = Field(0.0, ge=0, le=1)
    fault_rates: dict[str, float] = Field(
        default_factory=dict, description='Faults of other models by name, as JSON: {"bulb_failure": 0.1}'
    )
    seed: int = 0
    firmware_version: str = Field("1.0.0", description="The firmware every simulated device starts on")
    firmware_install_s: float = Field(2.0, ge=0, description="How long an install keeps a device silent")
    firmware_drift_c_per_h: float = Field(40.0, description="How fast a `drifts` firmware's reading drifts")
    firmware_faults: str = Field(
        "",
        description="Failure modes by firmware version: 6.6.6=bad_checksum,7.0.0=never_returns,8.0.0=drifts",
    )
    mqtt_host: str = "127.0.0.1"
    mqtt_port: int = Field(PLATFORM_PORT, gt=0, lt=65536, description="The broker's platform listener")
    mqtt_username: str = Field("_hearth_simulator", description="The hub's broker account")
    mqtt_password: str = ""
    log_level: str = "info"
    stack: StackSettings = Field(default_factory=StackSettings)

    @field_validator("drifting_ids", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return (
            [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value
        )

    def fleet_options(self) -> FleetOptions:
        return FleetOptions(
            rate=self.rate,
            offline_fraction=self.offline_fraction,
            ack_delay_s=self.ack_delay_s,
            lost_ack_fraction=self.lost_ack_fraction,
            duplicate_fraction=self.duplicate_fraction,
            reorder_fraction=self.reorder_fraction,
            drifting_ids=frozenset(self.drifting_ids),
            drifting_fraction=self.drifting_fraction,
            jam_probability=self.jam_probability,
            fault_rates=dict(self.fault_rates),
            seed=self.seed,
            firmware=FirmwareOptions(
                initial_version=self.firmware_version,
                install_s=self.firmware_install_s,
                drift_c_per_h=self.firmware_drift_c_per_h,
                faults=FirmwareOptions.parse_faults(self.firmware_faults),
            ),
        )

    def mqtt(self) -> dict[str, MqttEndpoint]:
        """Where each shard's hub connects: every shard's platform listener (``HEARTH_MQTT_SHARDS``), or
        ``mqtt_host:mqtt_port`` for the one broker there is."""
        shards = self.stack.mqtt_shards
        if shards is None:
            return {DEFAULT_SHARD: self._endpoint(self.mqtt_host, self.mqtt_port)}
        return {name: self._endpoint(*_host_port(shard.platform_url)) for name, shard in shards.items()}

    def _endpoint(self, host: str, port: int) -> MqttEndpoint:
        return MqttEndpoint(host, port, self.mqtt_username, self.mqtt_password)


def _host_port(url: str) -> tuple[str, int]:
    parsed = urlsplit(url)
    return parsed.hostname or "127.0.0.1", parsed.port or PLATFORM_PORT


__all__ = ["SimulatorSettings"]
