"""A stack of two MQTT broker shards for the shard tests: two Mosquittos (sharing the service accounts, as
``hearth up --mqtt-brokers 2`` runs them), a broker-access follower and a device gateway per shard, the
device actor, the command API and the simulator (a hub per shard), on their own topics
(``HEARTH_MQTT_SHARDS`` names both brokers)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from hearth_devstack.launch.server_startup import start_mosquitto
from hearth_devstack.launch.service_processes import Services, services_running
from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_devstack.servers.postgres import PostgresServer
from hearth_devstack.servers.redis import RedisServer
from hearth_devstack.supervision.ports import free_port
from hearth_devstack.supervision.process import ManagedProcess, tail
from hearth_shared.adapters.kafka import ensure_topics
from hearth_shared.schema.shards import DEFAULT_SHARD
from tests.support.platform import Platform, make_settings

SHARDS = (DEFAULT_SHARD, "1")


@dataclass
class ShardStack:
    """The running parts, the command API's address and each shard's broker by name."""

    command_api: str
    brokers: dict[str, MosquittoBroker]
    parts: dict[str, ManagedProcess]
    platform: Platform

    def client(self) -> httpx.AsyncClient:
        """The command API with an admin token (it chooses device ids and moves devices)."""
        return self.platform.client(self.command_api)

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{tail(p.log_path, 30)}" for name, p in self.parts.items())


@contextmanager
def shard_stack(
    kafka: KafkaBroker, postgres: PostgresServer, redis_server: RedisServer, root: Path
) -> Iterator[ShardStack]:
    first = start_mosquitto(root, "mosquitto")
    second = start_mosquitto(root, "mosquitto-1", accounts_dir=first.server.access_dir)
    try:
        brokers = {DEFAULT_SHARD: first.server, "1": second.server}
        settings = make_settings(kafka, postgres, redis_server, f"sh{uuid.uuid4().hex[:8]}")
        asyncio.run(ensure_topics(settings.kafka_bootstrap_servers, settings.topics.specs()))
        services = Services.on_brokers(
            settings,
            [first.server, second.server],
            logs=root / "services",
            data=root / "data",
            command_api_port=free_port(),
            query_api_port=free_port(),
        )
        names = ["broker-access", "broker-access-1", "device-actor", "device-gateway", "device-gateway-1"]
        names += ["command-api", "simulator"]
        with services_running(services, names, patience=2, together=True) as parts:
            api = f"http://127.0.0.1:{services.command_api_port}"
            platform = Platform(settings, api, "", parts)
            yield ShardStack(api, brokers, parts, platform)
    finally:
        second.process.stop()
        first.process.stop()
