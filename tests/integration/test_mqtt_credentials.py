"""Device credentials end to end, enforced by the real broker: the command API issues, rotates and revokes;
the device actor records the facts; the broker-access follower applies them to Mosquitto; Debian's
``mosquitto_pub``/``mosquitto_sub`` play the device (on ``identity``: see tests/support/identity_stack.py).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest

from hearth_device_gateway.app import make_follower
from hearth_device_gateway.settings import BrokerAccessSettings
from hearth_devstack.servers.mosquitto import MqttAccount
from hearth_shared.schema.credentials import ITERATIONS
from hearth_shared.schema.events import DeviceCredentialsIssued
from tests.support.identity_stack import Identity, account, connected_device, journal_facts, register
from tests.support.mosquitto_clients import NOT_AUTHORISED, publish, wait_connect_code

pytestmark = pytest.mark.integration

REVOKE_WITHIN_S = 5.0


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


async def test_only_the_devices_home_or_an_admin_may_rotate_or_revoke(identity: Identity) -> None:
    home, other = f"home-{uuid.uuid4().hex[:8]}", f"home-{uuid.uuid4().hex[:8]}"
    async with identity.client(home) as api:
        device_id = (await register(api, home))["device_id"]
    async with identity.client(other) as stranger:
        for method in ("POST", "DELETE"):
            response = await stranger.request(method, f"/v1/devices/{device_id}/credentials")
            assert response.status_code == 404, response.text  # another home's device: not found, no leak
        unknown = await stranger.post("/v1/devices/no-such-device/credentials")
        assert unknown.status_code == 404
    async with httpx.AsyncClient(base_url=identity.command_api) as anonymous:
        assert (await anonymous.post(f"/v1/devices/{device_id}/credentials")).status_code == 401
    async with identity.client(None) as admin:  # an admin token
        rotated = await admin.post(f"/v1/devices/{device_id}/credentials")
        assert rotated.status_code == 201 and rotated.json()["username"] == device_id
