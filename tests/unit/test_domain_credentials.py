"""Device credentials through decide -> stamp -> evolve: issue, rotate, revoke, redelivery, replay."""

from __future__ import annotations

import uuid
from functools import reduce

import pytest

from hearth_shared.domain import Twin, evolve
from hearth_shared.schema.credentials import hash_secret, new_secret, verify_secret
from hearth_shared.schema.events import (
    DeviceCameOnline,
    DeviceCredentialsIssued,
    DeviceCredentialsRevoked,
    DeviceRegistered,
    DeviceWentOffline,
    IssueCredentials,
    RegisterDevice,
    RevokeCredentials,
    decode_event,
    encode,
)
from tests.unit.test_domain_lifecycle import Device, at

pytestmark = pytest.mark.unit


def issue(device: Device, credential_id: uuid.UUID, password_hash: str, seconds: float = 1) -> list[type]:
    request = IssueCredentials(
        request_id=uuid.uuid4(),
        device_id="t1",
        sent_at=at(seconds),
        credential_id=credential_id,
        password_hash=password_hash,
    )
    return device.send(request, at(seconds))


def revoke(device: Device, seconds: float = 2) -> list[type]:
    return device.send(
        RevokeCredentials(request_id=uuid.uuid4(), device_id="t1", sent_at=at(seconds)), at(seconds)
    )


def test_issue_rotate_revoke_are_facts_with_the_hash_only() -> None:
    device = Device()
    device.register()
    secret, first = new_secret(), uuid.uuid4()
    assert issue(device, first, hash_secret(secret)) == [DeviceCredentialsIssued]
    assert device.twin is not None and device.twin.credential_id == first
    issued = device.journal[-1]
    assert isinstance(issued, DeviceCredentialsIssued)
    assert secret not in encode(issued).decode()  # the journal never holds the secret
    assert verify_secret(secret, issued.payload.password_hash)

    second = uuid.uuid4()
    assert issue(device, second, hash_secret(new_secret()), 2) == [
        DeviceCredentialsRevoked,
        DeviceCredentialsIssued,
    ]
    rotated = device.journal[-2]
    assert isinstance(rotated, DeviceCredentialsRevoked)
    assert (rotated.payload.credential_id, rotated.payload.reason) == (first, "rotated")
    assert device.twin.credential_id == second

    assert revoke(device, 3) == [DeviceCredentialsRevoked]
    revoked = device.journal[-1]
    assert isinstance(revoked, DeviceCredentialsRevoked)
    assert (revoked.payload.credential_id, revoked.payload.reason) == (second, "revoked")
    assert device.twin.credential_id is None


def test_redelivered_issue_and_revoke_without_credential_change_nothing() -> None:
    device = Device()
    device.register()
    assert revoke(device) == []
    credential_id, password_hash = uuid.uuid4(), hash_secret(new_secret())
    assert issue(device, credential_id, password_hash) == [DeviceCredentialsIssued]
    assert issue(device, credential_id, password_hash) == []  # the same request, delivered twice
    assert issue(device, uuid.uuid4(), hash_secret(new_secret())) == [
        DeviceCredentialsRevoked,
        DeviceCredentialsIssued,
    ]
    # The first request redelivered after the rotation must not bring the rotated-out credential back.
    assert issue(device, credential_id, password_hash) == []


def test_credentials_for_an_unregistered_device_are_ignored() -> None:
    device = Device()
    assert issue(device, uuid.uuid4(), hash_secret(new_secret())) == []
    assert revoke(device) == []


def test_replaying_the_journal_rebuilds_the_credential_in_force() -> None:
    device = Device()
    device.register()
    issue(device, uuid.uuid4(), hash_secret(new_secret()), 1)
    last = uuid.uuid4()
    issue(device, last, hash_secret(new_secret()), 2)
    replayed: Twin | None = reduce(evolve, (decode_event(encode(e)) for e in device.journal), None)
    assert replayed == device.twin
    assert replayed is not None and replayed.credential_id == last


@pytest.mark.parametrize("simulated", [False, True])
def test_simulated_is_recorded_at_registration(simulated: bool) -> None:
    device = Device()
    request = RegisterDevice(
        request_id=uuid.uuid4(),
        device_id="t1",
        sent_at=at(0),
        home_id="h1",
        device_type="lock",
        name="Door",
        simulated=simulated,
    )
    assert device.send(request, at(0)) == [DeviceRegistered]
    registered = device.journal[0]
    assert isinstance(registered, DeviceRegistered) and registered.payload.simulated is simulated
    assert device.twin is not None and device.twin.simulated is simulated


def test_a_registration_recorded_before_simulated_existed_decodes_as_not_simulated() -> None:
    old = (
        b'{"type":"device.registered","event_id":"6f1f6f0b-1e11-4a8e-8c1e-3f7d9a5252f4","device_id":"t1",'
        b'"home_id":"h1","version":1,"occurred_at":"2026-01-01T12:00:00Z",'
        b'"recorded_at":"2026-01-01T12:00:00Z","payload":{"device_type":"lock","name":"Door"}}'
    )
    event = decode_event(old)
    assert isinstance(event, DeviceRegistered) and event.payload.simulated is False


def test_revoking_an_online_devices_credential_takes_it_offline() -> None:
    device = Device()
    device.register()
    issue(device, uuid.uuid4(), hash_secret(new_secret()), 1)
    assert device.availability(at(2), online=True) == [DeviceCameOnline]
    assert revoke(device, 3) == [DeviceCredentialsRevoked, DeviceWentOffline]
    assert device.twin is not None and not device.twin.online
    issue(device, uuid.uuid4(), hash_secret(new_secret()), 4)  # offline already: only the facts of the issue
    assert [type(e) for e in device.journal[-1:]] == [DeviceCredentialsIssued]
