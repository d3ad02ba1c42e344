"""Device actor settings, env prefix ``HEARTH_DEVICE_ACTOR_``."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from hearth_shared.adapters.settings import StackSettings


class DeviceActorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HEARTH_DEVICE_ACTOR_", extra="ignore")

    app_id: str = "hearth-device-actor"
    data_dir: str = ".hearth/device-actor"
    batch_size: int = Field(5000, gt=0, description="Inbox records handled per batch at most")
    coalesce_after: int = Field(
        2000,
        ge=0,
        description="Records a telemetry partition may be behind its end before a batch's state reports of "
        "one device are coalesced into one (0: never; see service/coalescing.py)",
    )
    fetch_wait_ms: int = Field(
        20,
        gt=0,
        description="How long the broker may hold the inbox consumer's fetch for records to come (Kafka's "
        "fetch.max.wait.ms, default 500): while a fetch for the empty command lane is held, telemetry "
        "already handled cannot be fetched again (see entrypoints/inbox.py, Fetch wait)",
    )
    idle_fetch_wait_ms: int = Field(
        500,
        gt=0,
        description="The same while the worker is idle (its last round fetched nothing): a held fetch comes "
        "back at its first record, so a longer wait delays nothing and spares the broker an idle worker's "
        "fetch every fetch_wait_ms (see entrypoints/inbox.py, Fetch wait)",
    )
    check_commands_ms: int = Field(
        20,
        gt=0,
        description="While a batch of telemetry is decided, how often the worker takes the command-lane "
        "records that came meanwhile and decides them first (a command waits this long behind telemetry "
        "at most, not for the whole batch; see entrypoints/inbox.py, Two lanes)",
    )
    offline_after_s: float = Field(60.0, gt=0, description="Silence after which a device is offline")
    tick_interval_s: float = Field(0.5, gt=0, description="How often deadlines are checked")
    tick_chunk: int = Field(
        500,
        gt=0,
        description="Twins whose deadline passed that are checked at a time: a batch of the inbox (a "
        "command) waiting meanwhile goes between two such chunks (see DeviceActors.check_deadlines)",
    )
    session_timeout_s: float = 8.0
    max_poll_interval_s: float = Field(
        300.0,
        gt=0,
        description="How long faust's consumer may go without fetching before aiokafka leaves the group; "
        "the worker fetches every fifth of it (adapters/keep_fetching.py)",
    )
    instance: str | None = Field(
        None,
        description="Stable and unique per worker (a StatefulSet pod's name): the consumer's static group "
        "membership (Kafka's group.instance.id), so a restarted worker rejoins at once with its partitions "
        "instead of waiting out its old session; None: dynamic membership",
    )
    log_level: str = "info"
    stack: StackSettings = Field(default_factory=StackSettings)
