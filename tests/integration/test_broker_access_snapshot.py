"""Broker access restarts from its snapshot, against a real Mosquitto: a device whose credential facts a
retention window removed from the journal still connects with its password after the follower restarts,
even on a broker whose access files were made afresh (only the snapshot can give them back); a device
revoked before the window stays refused and is told offline again; the facts written while the follower
was down (the journal's tail) are all it reads, and a revocation among them finds the credential in
force by the id the snapshot kept.

Each test has its own broker and topics: the follower here is the one owner of this broker's files (the
session's and the identity stack's brokers have their own followers).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hearth_device_gateway.app import make_follower
from hearth_device_gateway.entrypoints.broker_access_follower import BrokerAccessFollower
from hearth_device_gateway.settings import BrokerAccessSettings
from hearth_devstack.launch.server_startup import MOSQUITTO_STARTUP_S, start_healthy
from hearth_devstack.servers.mosquitto import MosquittoBroker, MqttAccount
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.topic_follower import REPORTS_ENV
from hearth_shared.schema.credentials import hash_secret, new_secret
from hearth_shared.schema.events import (
    CredentialsIssuedPayload,
    CredentialsRevokedPayload,
    DeviceCredentialsIssued,
    DeviceCredentialsRevoked,
    DeviceRegistered,
    DeviceRegisteredPayload,
    Event,
)
from hearth_shared.schema.mqtt import availability_topic
from tests.support.mosquitto_clients import (
    NOT_AUTHORISED,
    broker_on_free_ports,
    publish,
    retained,
    wait_connect_code,
)
from tests.support.topics import pass_retention, produce_facts
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HOME = "home-snapshot"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MosquittoBroker]:
    """A broker of this test's own, with the launcher's fresh files (no device yet)."""
    broker = broker_on_free_ports(tmp_path / "mosquitto", tmp_path)
    process = start_healthy(broker.process(), MOSQUITTO_STARTUP_S)
    yield broker
    process.stop()


class DeviceFacts:
    """The facts the device actor records for a device's registration and its credentials."""

    def __init__(self, account: MqttAccount) -> None:
        self.account = account
        self.credential_id = uuid.uuid4()
        self.version = 0

    def _envelope(self) -> dict[str, Any]:
        self.version += 1
        now = datetime.now(UTC)
        return {"event_id": uuid.uuid4(), "device_id": self.account.username, "home_id": HOME,
                "version": self.version, "occurred_at": now, "recorded_at": now}  # fmt: skip

    def registered_with_credentials(self) -> list[Event]:
        payload = DeviceRegisteredPayload(device_type="lock", name="Door", simulated=False)
        issued = CredentialsIssuedPayload(
            credential_id=self.credential_id,
            password_hash=hash_secret(self.account.password),
            issued_at=datetime.now(UTC),
        )
        return [
            DeviceRegistered(**self._envelope(), payload=payload),
            DeviceCredentialsIssued(**self._envelope(), payload=issued),
        ]

    def revoked(self) -> Event:
        payload = CredentialsRevokedPayload(credential_id=self.credential_id, reason="revoked")
        return DeviceCredentialsRevoked(**self._envelope(), payload=payload)


def device(name: str) -> DeviceFacts:
    return DeviceFacts(MqttAccount(f"{name}-{uuid.uuid4().hex[:8]}", new_secret()))


async def started_follower(stack: StackSettings, broker: MosquittoBroker) -> BrokerAccessFollower:
    """Broker access as the stack runs it (real SIGHUP reloads, its MQTT link on the platform listener,
    snapshots on the stack's snapshots topic), once it has written the files and the broker loaded them."""
    settings = BrokerAccessSettings(
        access_dir=broker.access_dir,
        pid_file=broker.pid_file,
        mqtt_port=broker.platform_port,
        mqtt_password=broker.admin.password,
        stack=stack,
    )
    follower = make_follower(settings)
    await follower.start()
    try:
        await follower.feed.wait_caught_up()
    except BaseException:
        await follower.stop()
        raise
    return follower


def retained_availability(broker: MosquittoBroker, facts: DeviceFacts) -> str:
    return retained(broker, availability_topic(facts.account.username))


async def test_a_device_whose_facts_retention_removed_connects_after_a_restart_from_the_snapshot(
    stack: StackSettings, broker: MosquittoBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports = tmp_path / "reports"
    monkeypatch.setenv(REPORTS_ENV, str(reports))
    kept, gone, late = device("kept"), device("gone"), device("late")
    await produce_facts(stack, [*kept.registered_with_credentials(), *gone.registered_with_credentials()])
    await produce_facts(stack, [gone.revoked()])

    first = await started_follower(stack, broker)
    try:
        assert first.restart.started_from == "first offset (no snapshot yet)"
        assert first.restart.replayed == 5
        await wait_connect_code(broker, kept.account, 0)
        await wait_connect_code(broker, gone.account, NOT_AUTHORISED)
        files = broker.password_file.read_text(), broker.acl_file.read_text()
    finally:
        await first.stop()  # a clean stop saves the snapshot
    assert first.restart.snapshots_saved == 1 and first.failed is None

    # The window passes over every fact there is; broker access is down; the broker's files are made
    # afresh (a new volume, say) and loaded: the broker knows no device now.
    await pass_retention(stack.kafka_bootstrap_servers, stack.topics.journal)
    broker.password_file.unlink()
    broker.acl_file.unlink()
    broker.write_service_access()
    broker.reload()
    await wait_connect_code(broker, kept.account, NOT_AUTHORISED)
    # Its retained availability says online now (mosquitto_pub sends no empty message to clear it).
    claimed = publish(broker, broker.admin, availability_topic(gone.account.username), "online", retain=True)
    assert claimed.returncode == 0, claimed.stderr
    assert await asyncio.to_thread(retained_availability, broker, gone) == "online"
    await produce_facts(stack, late.registered_with_credentials())  # written while broker access is down

    second = await started_follower(stack, broker)
    try:
        restart = second.restart
        assert restart.started_from == "snapshot", restart
        assert (restart.replayed, restart.gap) == (2, 0), restart  # the tail only; nothing was lost
        await wait_connect_code(broker, kept.account, 0)
        await wait_connect_code(broker, late.account, 0)
        await wait_connect_code(broker, gone.account, NOT_AUTHORISED)
        assert kept.account.username in broker.password_file.read_text()
        assert (broker.password_file.read_text(), broker.acl_file.read_text()) != files  # late is in too
        report = json.loads((reports / f"{second.feed.name}.json").read_text())
        assert report["started_from"] == "snapshot" and report["replayed"] == 2, report

        async def gone_is_offline_again() -> bool:  # the revoked set came back with the snapshot
            return await asyncio.to_thread(retained_availability, broker, gone) == "offline"

        await eventually(gone_is_offline_again, "the revoked device's retained offline", timeout_s=30)

        await produce_facts(stack, [kept.revoked()])  # by the credential id only the snapshot still has
        await wait_connect_code(broker, kept.account, NOT_AUTHORISED)
        assert kept.account.username not in broker.password_file.read_text()
        assert second.failed is None
    finally:
        await second.stop()
