"""The broker's password file and ACL as folded from the journal's facts (MosquittoAccess, pure)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from hearth_device_gateway.service.mosquitto_access import MosquittoAccess
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

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 23, tzinfo=UTC)
SERVICES_ACL = "user _hearth_gateway\ntopic readwrite hearth/#\n"


def envelope(device_id: str, version: int) -> dict[str, Any]:
    return {
        "event_id": uuid.uuid4(),
        "device_id": device_id,
        "home_id": "h1",
        "version": version,
        "occurred_at": NOW,
        "recorded_at": NOW,
    }


def registered(device_id: str, *, simulated: bool) -> Event:
    payload = DeviceRegisteredPayload(device_type="lock", name="Door", simulated=simulated)
    return DeviceRegistered(**envelope(device_id, 1), payload=payload)


def issued(device_id: str, credential_id: uuid.UUID, password_hash: str) -> Event:
    payload = CredentialsIssuedPayload(
        credential_id=credential_id, password_hash=password_hash, issued_at=NOW
    )
    return DeviceCredentialsIssued(**envelope(device_id, 2), payload=payload)


def revoked(device_id: str, credential_id: uuid.UUID) -> Event:
    payload = CredentialsRevokedPayload(credential_id=credential_id, reason="revoked")
    return DeviceCredentialsRevoked(**envelope(device_id, 3), payload=payload)


def test_the_password_file_holds_the_hash_in_force_per_device_and_no_service_account() -> None:
    access = MosquittoAccess()
    first, second = uuid.uuid4(), uuid.uuid4()
    hash_b, hash_a, hash_a2 = hash_secret(new_secret()), hash_secret(new_secret()), hash_secret(new_secret())
    assert access.apply(issued("b-lock", uuid.uuid4(), hash_b))
    assert access.apply(issued("a-lock", first, hash_a))
    assert access.apply(issued("a-lock", second, hash_a2))  # rotated
    assert not access.apply(revoked("a-lock", first))  # the older credential: the new one stays
    assert access.password_file() == f"a-lock:{hash_a2}\nb-lock:{hash_b}\n"
    assert access.revoked == set()  # a rotation: the device has a credential all along
    assert access.apply(revoked("a-lock", second))
    assert access.password_file() == f"b-lock:{hash_b}\n"
    assert access.revoked == {"a-lock"}  # no credential any more: its availability is Hearth's to set
    assert access.apply(issued("a-lock", uuid.uuid4(), hash_a))
    assert access.revoked == set()


def test_facts_the_broker_could_misread_change_nothing() -> None:
    access = MosquittoAccess()
    assert not access.apply(issued("a-lock", uuid.uuid4(), "plaintext-not-a-hash"))
    assert not access.apply(issued("bad/id", uuid.uuid4(), hash_secret("x")))  # not an identifier
    assert not access.apply(registered("+", simulated=True))
    assert access.password_file() == "" and "hearth/devices/+" not in access.acl_file(SERVICES_ACL)


def test_the_acl_gives_devices_their_own_topics_and_the_hub_only_simulated_devices() -> None:
    access = MosquittoAccess()
    assert access.apply(registered("sim-2", simulated=True))
    assert access.apply(registered("sim-1", simulated=True))
    assert not access.apply(registered("sim-1", simulated=True))  # a replayed fact
    assert not access.apply(registered("real-1", simulated=False))
    acl = access.acl_file(SERVICES_ACL).splitlines()
    assert acl[:2] == SERVICES_ACL.splitlines()
    hub = acl[acl.index("user _hearth_simulator") + 1 :]
    hub = hub[: hub.index("")]
    assert hub == [
        "topic write hearth/hubs/_hearth_simulator/availability",  # its will, for its children
        "topic read hearth/hubs/_hearth_simulator/devices/+",  # which children the broker lets it act for
        "topic readwrite hearth/devices/sim-1/#",  # one line a device: loading is quadratic in lines
        "topic readwrite hearth/devices/sim-2/#",
    ]
    patterns = [line for line in acl if line.startswith("pattern ")]
    assert patterns == [
        "pattern write hearth/devices/%u/state",
        "pattern write hearth/devices/%u/acks",
        "pattern write hearth/devices/%u/availability",
        "pattern read hearth/devices/%u/commands",
        "pattern read hearth/devices/%u/errors",
    ]
    assert not any("real-1" in line for line in acl)


def test_the_same_facts_in_any_replay_give_the_same_files() -> None:
    facts = [registered("sim-1", simulated=True), issued("a-lock", uuid.uuid4(), hash_secret("s"))]
    first, second = MosquittoAccess(), MosquittoAccess()
    for fact in facts:
        first.apply(fact)
    for fact in facts + facts:  # replayed twice, as a restarted follower would
        second.apply(fact)
    assert first.password_file() == second.password_file()
    assert first.acl_file(SERVICES_ACL) == second.acl_file(SERVICES_ACL)
    assert first.files(SERVICES_ACL) == second.files(SERVICES_ACL)


def test_the_reload_mark_names_the_files_it_is_in() -> None:
    """The gateway may read ``hearth-access/reloaded/{mark}`` only under the files with that mark, so the
    follower's message there is delivered only once the broker has loaded them."""
    access = MosquittoAccess()
    before = access.files(SERVICES_ACL)
    assert before.acl.endswith(f"user _hearth_gateway\ntopic read hearth-access/reloaded/{before.mark}\n")
    access.apply(registered("sim-1", simulated=True))
    after = access.files(SERVICES_ACL)
    assert after.mark != before.mark and before.mark not in after.acl
    access.apply(issued("a-lock", uuid.uuid4(), hash_secret("s")))
    assert access.files(SERVICES_ACL).mark != after.mark  # the password file is in the mark too


def folded_access() -> tuple[MosquittoAccess, list[Event]]:
    """A fold of every kind of fact: simulated and real devices, a rotation, a revocation, a device
    revoked for good (its availability is Hearth's)."""
    kept, rotated, gone = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    facts = [
        registered("sim-1", simulated=True),
        registered("sim-2", simulated=True),
        registered("a-lock", simulated=False),
        issued("a-lock", kept, hash_secret("a")),
        issued("b-lock", rotated, hash_secret("b")),
        issued("b-lock", uuid.uuid4(), hash_secret("b2")),  # rotated: the newer credential is in force
        issued("c-lock", gone, hash_secret("c")),
        revoked("c-lock", gone),
    ]
    access = MosquittoAccess()
    for fact in facts:
        access.apply(fact)
    return access, facts


def test_a_restored_snapshot_renders_the_files_of_the_fold_it_was_taken_of() -> None:
    access, _ = folded_access()
    restored = MosquittoAccess()
    restored.restore(access.snapshot())
    assert restored.files(SERVICES_ACL) == access.files(SERVICES_ACL)  # passwd, acl and reload mark
    assert restored == access  # and the state the next facts fold into: the revoked device included
    assert restored.revoked == {"c-lock"} and restored.simulated == {"sim-1", "sim-2"}
    assert restored.snapshot() == access.snapshot()  # deterministic: the same state, the same bytes


def test_a_restored_fold_goes_on_as_the_original_would() -> None:
    access, facts = folded_access()
    restored = MosquittoAccess()
    restored.restore(access.snapshot())
    in_force = facts[5]
    assert isinstance(in_force, DeviceCredentialsIssued)
    for fold in (access, restored):  # the credential in force, by its id: only a snapshot still knows it
        assert fold.apply(revoked("b-lock", in_force.payload.credential_id))
        assert fold.apply(registered("sim-3", simulated=True))
    assert restored.files(SERVICES_ACL) == access.files(SERVICES_ACL)
    assert "b-lock" not in restored.password_file() and restored.revoked == {"b-lock", "c-lock"}


def test_an_empty_fold_round_trips() -> None:
    restored = MosquittoAccess()
    restored.restore(MosquittoAccess().snapshot())
    assert restored == MosquittoAccess()
    assert restored.files(SERVICES_ACL) == MosquittoAccess().files(SERVICES_ACL)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not msgpack at all",
        msgspec.msgpack.encode({"format": "mosquitto-access/99", "hashes": {}}),  # a format it cannot read
        # hashes and credential ids that disagree: a revocation could not apply
        msgspec.msgpack.encode(
            {"format": "mosquitto-access/1", "hashes": {"a": "x"}, "credential_ids": {}}
            | {"simulated": [], "revoked": []}
        ),
    ],
)
def test_a_snapshot_it_cannot_read_raises_and_leaves_the_state_as_it_was(data: bytes) -> None:
    access, _ = folded_access()
    before = access.files(SERVICES_ACL)
    with pytest.raises((msgspec.DecodeError, ValueError)):
        access.restore(data)
    assert access.files(SERVICES_ACL) == before
