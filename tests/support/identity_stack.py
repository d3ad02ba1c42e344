"""What device-identity tests run: the parts identity needs, and how to use them.

``identity_stack`` starts its own broker, broker-access follower, device actor and command API on their
own topics, rather than the session's whole platform: identity needs no gateway or read models, and the
broker's access files are then this stack's alone (the platform's follower owns the session broker's).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer

from hearth_devstack.launch.server_startup import MOSQUITTO_STARTUP_S, start_healthy
from hearth_devstack.launch.service_processes import Services, services_running
from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.servers.mosquitto import MosquittoBroker, MqttAccount
from hearth_devstack.servers.postgres import PostgresServer
from hearth_devstack.servers.redis import RedisServer
from hearth_devstack.supervision.ports import free_port
from hearth_devstack.supervision.process import ManagedProcess, tail
from hearth_shared.adapters.kafka import ensure_topics, topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import decode_event
from tests.support.mosquitto_clients import Subscriber, broker_on_free_ports, wait_connect_code
from tests.support.platform import Platform, make_settings
from tests.support.waiting import eventually


@dataclass
class Identity:
    """The running identity parts: their settings, command API and broker."""

    settings: StackSettings
    command_api: str
    broker: MosquittoBroker
    parts: dict[str, ManagedProcess]

    def client(self, home_id: str | None) -> httpx.AsyncClient:
        """A client with a token of ``home_id`` (None: an admin token)."""
        return Platform(self.settings, self.command_api, "", self.parts).client(self.command_api, home_id)

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{tail(p.log_path, 30)}" for name, p in self.parts.items())


@contextmanager
def identity_stack(
    kafka: KafkaBroker, postgres: PostgresServer, redis_server: RedisServer, root: Path
) -> Iterator[Identity]:
    """Its own broker, broker-access follower, device actor and command API, on its own topics."""
    broker = broker_on_free_ports(root / "mosquitto", root)
    settings = make_settings(kafka, postgres, redis_server, f"id{uuid.uuid4().hex[:8]}")
    asyncio.run(ensure_topics(settings.kafka_bootstrap_servers, settings.topics.specs()))
    services = Services.on_brokers(
        settings,
        [broker],
        logs=root / "services",
        data=root / "data",
        command_api_port=free_port(),
        query_api_port=free_port(),
    )
    mosquitto = start_healthy(broker.process(), MOSQUITTO_STARTUP_S)
    try:
        # twice the services' patience: a shared, busy machine; all at once, as the local stack starts them
        names = ("broker-access", "device-actor", "command-api")
        with services_running(services, names, patience=2, together=True) as parts:
            api = f"http://127.0.0.1:{services.command_api_port}"
            yield Identity(settings, api, broker, {"mosquitto": mosquitto, **parts})
    finally:
        mosquitto.stop()


async def journal_facts(
    settings: StackSettings, device_id: str, wire_type: str, timeout_s: float = 30.0
) -> list[Any]:
    """The device's facts of ``wire_type`` in the journal (waiting for one), each with its raw record."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = await topic_partitions(consumer, settings.topics.journal)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        found: list[Any] = []

        async def one_found() -> bool:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    if record.key == device_id.encode() and wire_type.encode() in record.value:
                        found.append((decode_event(record.value), record.value))
            return bool(found)

        with contextlib.suppress(AssertionError):  # none within the time: the caller asserts on what it got
            await eventually(one_found, f"a {wire_type} fact of {device_id}", timeout_s=timeout_s, every_s=0)
        return found
    finally:
        await consumer.stop()


async def register(api: httpx.AsyncClient, home_id: str, *, simulated: bool = False) -> dict[str, Any]:
    body = {  # no device_id: a home token does not choose it (the server names it)
        "home_id": home_id,
        "type": "lock",
        "name": "Door",
        "simulated": simulated,
    }
    response = await api.post("/v1/devices", json=body)
    assert response.status_code == 201, response.text
    registered: dict[str, Any] = response.json()
    return registered


def account(credentials: Mapping[str, str]) -> MqttAccount:
    return MqttAccount(credentials["username"], credentials["password"])


async def connected_device(
    identity: Identity, tmp_path: Path, home_id: str
) -> tuple[str, MqttAccount, Subscriber]:
    """A registered device whose ``mosquitto_sub`` is connected with its credential, on its commands."""
    async with identity.client(home_id) as api:
        twin = await register(api, home_id)
    device, mosquitto = account(twin["credentials"]), identity.broker
    await wait_connect_code(mosquitto, device, 0)
    sub = Subscriber(mosquitto, device, [f"hearth/devices/{device.username}/commands"], tmp_path / "sub.out")
    sub.start()
    await asyncio.sleep(0.5)
    assert sub.proc is not None and sub.proc.poll() is None, sub.lines()
    return twin["device_id"], device, sub
