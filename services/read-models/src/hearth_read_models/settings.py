"""Read-model settings, env prefix ``HEARTH_READ_MODELS_``."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from hearth_shared.adapters.settings import StackSettings
from hearth_shared.web.http_errors import DEFAULT_MAX_BODY_BYTES


class ReadModelSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HEARTH_READ_MODELS_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8001
    api_workers: int = Field(
        2,
        ge=1,
        description="Query-API processes sharing the port (one per core): each fans changes out to its own "
        "websockets from its own Redis subscription",
    )
    schema_name: str = Field("read_models", description="PostgreSQL schema that holds the live views")
    consumer_name: str = "projector"
    batch_size: int = Field(5000, gt=0)
    batch_wait_ms: int = Field(50, ge=0)
    batch_linger_ms: int = Field(
        20, ge=0, description="How long a live batch gathers facts after its first (fewer transactions)"
    )
    stack: StackSettings = Field(default_factory=StackSettings)
    max_body_bytes: int = Field(
        DEFAULT_MAX_BODY_BYTES, ge=0, description="Request bodies over this many bytes get 413, unread"
    )
    subscribe_heartbeat_s: float = Field(15.0, gt=0, description="Seconds between heartbeats on a websocket")
    subscribe_queue_size: int = Field(
        1000, gt=0, description="Changes a websocket may have waiting before it is closed as too slow (4408)"
    )
    ws_per_message_deflate: bool = Field(
        False,
        description="Accept permessage-deflate on websockets. Off by default: each websocket's compressor "
        "compresses every change again for that client alone (a fifth of a 1,000-client fan-out's CPU)",
    )
    subscribe_max_message_bytes: int = Field(
        256 * 1024,
        gt=0,
        description="A websocket message from a client over this size is refused with 4400 (the server's own "
        "frame limit, four times this, closes bigger ones with 1009 before buffering them)",
    )
    ws_ping_interval_s: float = Field(20.0, gt=0, description="Seconds between websocket pings")
    ws_ping_timeout_s: float = Field(
        20.0, gt=0, description="A websocket client that answers no ping for this long is closed 4408"
    )
    subscribe_catchup_s: float = Field(
        2.0, ge=0, description="How long a subscription re-reads history that lags a change seen live"
    )
    page_token_lifetime_s: float = Field(
        900.0, gt=1, le=86400, description="Lifetime of the live page's token (POST /v1/session); it renews"
    )
