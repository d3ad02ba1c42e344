"""Device credentials end to end, enforced by the real broker: the command API issues, rotates and revokes;
the device actor records the facts; the broker-access follower applies them to Mosquitto; Debian's
``mosquitto_pub``/``mosquitto_sub`` play the device.

These tests run the parts identity needs (their own broker, broker-access follower, device actor and
command API, on their own topics) rather than the session's whole platform: they need no gateway or
read models, and their broker's access files are theirs alone. The last test, a person being a device
with the mosquitto clients as the README shows, needs the whole platform (gateway included).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaConsumer

from hearth.stack.kafka import KafkaBroker
from hearth.stack.local import Services
from hearth.stack.mosquitto import MosquittoBroker, MqttAccount
from hearth.stack.postgres import PostgresServer
from hearth.stack.process import ManagedProcess, free_port, tail
from hearth.stack.redis import RedisServer
from hearth_device_gateway.broker_access import make_follower
from hearth_device_gateway.settings import BrokerAccessSettings
from hearth_shared.credentials import ITERATIONS
from hearth_shared.events import DeviceCredentialsIssued, decode_event
from hearth_shared.kafka import ensure_topics, topic_partitions
from hearth_shared.settings import StackSettings
from tests.conftest import Platform, _started, make_settings
from tests.mosquitto_clients import NOT_AUTHORISED, Subscriber, publish, wait_connect_code

pytestmark = pytest.mark.integration

REVOKE_WITHIN_S = 5.0


@dataclass
class Identity:
    """The running identity parts: their settings, command API and broker."""

    settings: StackSettings
    command_api: str
    broker: MosquittoBroker
    parts: dict[str, ManagedProcess]

    def client(self, home_id: str) -> httpx.AsyncClient:
        return Platform(self.settings, self.command_api, "", self.parts).client(self.command_api, home_id)

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{tail(p.log_path, 30)}" for name, p in self.parts.items())


@pytest.fixture(scope="module")
def identity(
    kafka: KafkaBroker,
    postgres: PostgresServer,
    redis_server: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Identity]:
    root = tmp_path_factory.mktemp("identity")
    broker = MosquittoBroker(
        data_dir=root / "mosquitto", port=free_port(), tls_port=free_port(), log_dir=root
    )
    settings = make_settings(kafka, postgres, redis_server, f"id{uuid.uuid4().hex[:8]}")
    asyncio.run(ensure_topics(settings.kafka_bootstrap_servers, settings.topics.specs()))
    services = Services(
        settings,
        logs=root / "services",
        data=root / "data",
        command_api_port=free_port(),
        query_api_port=free_port(),
        mqtt_port=broker.port,
        mqtt_password=broker.admin.password,
        mqtt_access_dir=broker.access_dir,
        mqtt_pid_file=broker.pid_file,
    )
    parts: dict[str, ManagedProcess] = {}
    try:
        parts["mosquitto"] = _started(broker.process(), 30)
        for name in ("broker-access", "device-actor", "command-api"):
            part, timeout_s = services.part(name)
            parts[name] = _started(part, timeout_s * 2)  # twice the stack's patience: a shared, busy machine
        yield Identity(settings, f"http://127.0.0.1:{services.command_api_port}", broker, parts)
    finally:
        for part in reversed(parts.values()):
            part.stop()


async def journal_facts(
    settings: StackSettings, device_id: str, wire_type: str, timeout_s: float = 30.0
) -> list:
    """The device's facts of ``wire_type`` in the journal (waiting for one), each with its raw record."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = await topic_partitions(consumer, settings.topics.journal)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        found: list = []
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not found and asyncio.get_running_loop().time() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    if record.key == device_id.encode() and wire_type.encode() in record.value:
                        found.append((decode_event(record.value), record.value))
        return found
    finally:
        await consumer.stop()


async def register(api: httpx.AsyncClient, home_id: str, *, simulated: bool = False) -> dict:
    device_id = f"lock-{uuid.uuid4().hex[:10]}"
    body = {
        "device_id": device_id,
        "home_id": home_id,
        "type": "lock",
        "name": "Door",
        "simulated": simulated,
    }
    response = await api.post("/v1/devices", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def account(credentials: dict) -> MqttAccount:
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


async def test_registration_answers_a_credential_once_that_the_broker_accepts(identity: Identity) -> None:
    mosquitto = identity.broker
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with identity.client(home) as api:
        twin = await register(api, home)
    credentials = twin["credentials"]
    assert credentials["username"] == twin["device_id"]
    assert credentials["mqtt_url"] == mosquitto.url
    assert len(credentials["password"]) >= 43
    took = await wait_connect_code(mosquitto, account(credentials), 0)
    assert took < REVOKE_WITHIN_S
    wrong = MqttAccount(credentials["username"], credentials["password"][:-1] + "x")
    assert publish(mosquitto, wrong, "hearth/devices/x/state", "{}").returncode == NOT_AUTHORISED
    # TLS listener, with the certificate the stack made.
    tls = publish(
        mosquitto,
        account(credentials),
        f"hearth/devices/{twin['device_id']}/availability",
        "online",
        tls=True,
    )
    assert tls.returncode == 0, tls.stderr
    # The journal has the fact, with the hash and never the secret.
    found = await journal_facts(identity.settings, twin["device_id"], "device.credentials_issued")
    assert len(found) == 1, identity.logs()
    fact, raw = found[0]
    assert isinstance(fact, DeviceCredentialsIssued)
    assert fact.payload.password_hash.startswith(f"$7${ITERATIONS}$")
    assert credentials["password"].encode() not in raw  # the hash, never the secret


async def test_revocation_refuses_the_secret_and_drops_a_connected_device(
    identity: Identity, tmp_path: Path
) -> None:
    mosquitto = identity.broker
    home = f"home-{uuid.uuid4().hex[:8]}"
    device_id, device, sub = await connected_device(identity, tmp_path, home)
    try:
        async with identity.client(home) as api:
            response = await api.delete(f"/v1/devices/{device_id}/credentials")
        assert response.status_code == 204, response.text
        code, took = await sub.wait_exit(REVOKE_WITHIN_S)
        print(f"DELETE credentials -> connected mosquitto_sub dropped and refused: {took:.2f} s")
        assert code == NOT_AUTHORISED, sub.lines()  # dropped, and refused when it came back
        assert took < REVOKE_WITHIN_S
        assert (
            publish(mosquitto, device, f"hearth/devices/{device_id}/state", "{}").returncode == NOT_AUTHORISED
        )
    finally:
        sub.stop()


async def test_rotation_refuses_the_old_secret_drops_its_connection_and_accepts_the_new(
    identity: Identity, tmp_path: Path
) -> None:
    mosquitto = identity.broker
    home = f"home-{uuid.uuid4().hex[:8]}"
    device_id, old, sub = await connected_device(identity, tmp_path, home)
    try:
        async with identity.client(home) as api:
            response = await api.post(f"/v1/devices/{device_id}/credentials")
        assert response.status_code == 201, response.text
        new = account(response.json())
        assert new.username == device_id and new.password != old.password
        code, took = await sub.wait_exit(REVOKE_WITHIN_S)
        print(f"POST credentials (rotate) -> connected mosquitto_sub dropped and refused: {took:.2f} s")
        assert code == NOT_AUTHORISED and took < REVOKE_WITHIN_S, sub.lines()
        assert publish(mosquitto, old, f"hearth/devices/{device_id}/state", "{}").returncode == NOT_AUTHORISED
        await wait_connect_code(mosquitto, new, 0)
    finally:
        sub.stop()


async def test_a_device_can_neither_publish_nor_read_another_devices_topics(
    identity: Identity, tmp_path: Path
) -> None:
    mosquitto = identity.broker
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with identity.client(home) as api:
        mine, other = (
            account((await register(api, home))["credentials"]),
            (await register(api, home))["device_id"],
        )
    await wait_connect_code(mosquitto, mine, 0)
    watcher = Subscriber(
        mosquitto, mosquitto.admin, [f"hearth/devices/{other}/#"], tmp_path / "watch.out"
    ).start()
    spy = Subscriber(mosquitto, mine, [f"hearth/devices/{other}/commands"], tmp_path / "spy.out").start()
    try:
        await asyncio.sleep(0.5)
        forged = publish(mosquitto, mine, f"hearth/devices/{other}/state", '{"seq": 1}', mqtt5=True)
        assert "not authori" in (forged.stdout + forged.stderr).lower(), forged
        own = publish(mosquitto, mine, f"hearth/devices/{mine.username}/state", '{"seq": 1}')
        assert own.returncode == 0, own.stderr
        marker = f"marker-{uuid.uuid4().hex}"
        sent = publish(mosquitto, mosquitto.admin, f"hearth/devices/{other}/commands", marker)
        assert sent.returncode == 0, sent.stderr
        await watcher.wait_for_line(marker)  # it was delivered to a reader that may read it...
        await asyncio.sleep(0.5)
        assert not any(marker in line for line in spy.lines())  # ...and never to the other device
        assert not any('"seq": 1' in line for line in watcher.lines())  # the forged report never arrived
    finally:
        watcher.stop()
        spy.stop()


async def test_a_simulated_device_has_no_credential_and_only_the_simulator_hub_acts_for_it(
    identity: Identity, tmp_path: Path
) -> None:
    mosquitto = identity.broker
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with identity.client(home) as api:
        simulated = await register(api, home, simulated=True)
        real = await register(api, home)
        assert "credentials" not in simulated
        refused = await api.post(f"/v1/devices/{simulated['device_id']}/credentials")
        assert refused.status_code == 409, refused.text
    hub = mosquitto.simulator
    watcher = Subscriber(
        mosquitto,
        mosquitto.admin,
        [f"hearth/devices/{simulated['device_id']}/state", f"hearth/devices/{real['device_id']}/state"],
        tmp_path / "watch.out",
    ).start()
    try:
        await asyncio.sleep(0.5)
        for attempt in range(100):  # until the follower has given the hub the new device
            publish(mosquitto, hub, f"hearth/devices/{simulated['device_id']}/state", f"sim-{attempt}")
            if any("sim-" in line for line in watcher.lines()):
                break
            await asyncio.sleep(0.1)
        await watcher.wait_for_line(f"hearth/devices/{simulated['device_id']}/state sim-")
        forged = publish(
            mosquitto, hub, f"hearth/devices/{real['device_id']}/state", "hub-forged", mqtt5=True
        )
        assert "not authori" in (forged.stdout + forged.stderr).lower(), forged
        await asyncio.sleep(0.5)
        assert not any("hub-forged" in line for line in watcher.lines())
    finally:
        watcher.stop()


async def test_a_person_is_a_device_with_mosquitto_clients_as_the_readme_shows(
    platform: Platform, mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """The README's "Be a device from a terminal": mosquitto_sub for commands, mosquitto_pub for the
    availability, the ack and the state; the command converges."""
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with platform.client(platform.command_api, home) as api:
        twin = await register(api, home)
        device_id, device = twin["device_id"], account(twin["credentials"])
        await wait_connect_code(mosquitto, device, 0)
        base = f"hearth/devices/{device_id}"
        sub = Subscriber(
            mosquitto, device, [f"{base}/commands", f"{base}/errors"], tmp_path / "dev.out"
        ).start()
        try:
            await asyncio.sleep(0.5)
            online = publish(mosquitto, device, f"{base}/availability", "online", retain=True)
            assert online.returncode == 0, online.stderr
            report = '{"seq": 1, "at": "2026-11-23T12:00:00Z", "state": {"lock_state": "locked"}}'
            assert publish(mosquitto, device, f"{base}/state", report).returncode == 0
            sent = await api.post(f"/v1/devices/{device_id}/commands", json={"name": "unlock", "params": {}})
            assert sent.status_code == 202, sent.text
            command_id = sent.json()["command_id"]
            await sub.wait_for_line(command_id, timeout_s=30)
            ack = f'{{"command_id": "{command_id}", "result": "ok"}}'
            assert publish(mosquitto, device, f"{base}/acks", ack).returncode == 0
            report = '{"seq": 2, "at": "2026-11-23T12:00:01Z", "state": {"lock_state": "unlocked"}}'
            assert publish(mosquitto, device, f"{base}/state", report).returncode == 0
            for _ in range(100):
                status = await api.get(f"{platform.query_api}/v1/commands/{command_id}")
                if status.status_code == 200 and status.json().get("status") == "converged":
                    break
                await asyncio.sleep(0.2)
            assert status.json().get("status") == "converged", (status.text, sub.lines(), platform.logs())
        finally:
            sub.stop()


async def test_the_brokers_access_files_are_rebuilt_from_the_journal_alone(
    identity: Identity, tmp_path: Path
) -> None:
    mosquitto = identity.broker
    """A second follower, reading the journal from its start into an empty directory, writes the very
    files the running broker uses: the journal's facts are all it takes to know who may connect."""
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with identity.client(home) as api:
        kept = await register(api, home)
        revoked = await register(api, home)
        await register(api, home, simulated=True)
        assert (await api.delete(f"/v1/devices/{revoked['device_id']}/credentials")).status_code == 204
    await wait_connect_code(mosquitto, account(kept["credentials"]), 0)
    await wait_connect_code(mosquitto, account(revoked["credentials"]), NOT_AUTHORISED)
    rebuilt = tmp_path / "access"
    rebuilt.mkdir()
    for name in ("services.passwd", "services.acl"):
        (rebuilt / name).write_text((mosquitto.access_dir / name).read_text())
    settings = BrokerAccessSettings(
        access_dir=rebuilt, pid_file=tmp_path / "none.pid", stack=identity.settings
    )
    follower = make_follower(settings, reload=lambda: None)
    await follower.start()
    try:
        await asyncio.wait_for(follower.caught_up.wait(), 60)
    finally:
        await follower.stop()
    assert kept["device_id"] in (rebuilt / "passwd").read_text()
    assert revoked["device_id"] not in (rebuilt / "passwd").read_text()
    assert (rebuilt / "passwd").read_text() == mosquitto.password_file.read_text()
    assert (rebuilt / "acl").read_text() == mosquitto.acl_file.read_text()
