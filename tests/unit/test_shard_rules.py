"""MQTT broker shards in the parts that run without servers: the pick at registration, the device actor's
decisions about a move and a loaded credential, each broker's files holding only its own shard's devices,
the command API's book (each device's shard, an answer waiting for its secret to be loaded) and a
gateway publishing only its shard's commands."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from aiokafka import ConsumerRecord, TopicPartition

from hearth_command_api.service.device_book import DeviceBook
from hearth_device_gateway.entrypoints.downlink import Downlink
from hearth_device_gateway.service.mosquitto_access import AccessSnapshotV1, MosquittoAccess
from hearth_shared.domain import Twin, decide, evolve, stamp
from hearth_shared.schema.credentials import hash_secret, new_secret
from hearth_shared.schema.events import (
    DeviceCommand,
    DeviceCredentialsLoaded,
    DeviceShardMoved,
    DeviceWentOffline,
    Event,
    Inbound,
    IssueCredentials,
    MoveDeviceShard,
    RecordCredentialsLoaded,
    RegisterDevice,
    ReportAvailability,
    ShardMovedPayload,
    decode_event,
    encode,
    wire_name,
)
from hearth_shared.schema.mqtt import commands_topic
from hearth_shared.schema.shards import DEFAULT_SHARD, assign_shard
from tests.support.waiting import eventually

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)
SERVICES_ACL = "user _hearth_gateway\ntopic readwrite hearth/#\n"


def test_the_pick_is_stable_and_spreads_new_devices_over_the_shards() -> None:
    ids = [f"lock-{n}" for n in range(2000)]
    picks = [assign_shard(device_id, ["0", "1"]) for device_id in ids]
    assert picks == [assign_shard(device_id, ["0", "1"]) for device_id in ids]  # no per-process salt
    spread = Counter(picks)
    assert set(spread) == {"0", "1"} and min(spread.values()) > 800, spread
    assert {assign_shard(device_id, ["0"]) for device_id in ids} == {"0"}
    with pytest.raises(ValueError, match="no MQTT shard"):
        assign_shard("lock-1", [])


def request(kind: type[Inbound], device_id: str, **fields: Any) -> Inbound:
    return kind(request_id=uuid.uuid4(), device_id=device_id, sent_at=NOW, **fields)


def applied(twin: Twin | None, req: Inbound) -> tuple[Twin | None, list[Event]]:
    events = stamp(
        twin, decide(twin, req, NOW), home_id="h1", device_id=req.device_id, now=NOW, causation_id=None
    )
    for event in events:
        twin = evolve(twin, decode_event(encode(event)))  # as read back from the journal
    return twin, events


def test_the_shard_is_recorded_at_registration_and_moved_only_by_a_move_request() -> None:
    twin, events = applied(
        None, request(RegisterDevice, "d1", home_id="h1", device_type="lock", name="D", shard="1")
    )
    assert twin is not None and twin.shard == "1" and events[0].payload.shard == "1"  # type: ignore[attr-defined]
    twin, _ = applied(twin, request(ReportAvailability, "d1", online=True))
    twin, events = applied(twin, request(MoveDeviceShard, "d1", shard="0"))
    assert [type(e) for e in events] == [DeviceShardMoved, DeviceWentOffline]  # its old broker drops it
    assert twin is not None and (twin.shard, twin.online) == ("0", False)
    assert applied(twin, request(MoveDeviceShard, "d1", shard="0"))[1] == []  # there already


def test_a_loaded_credential_is_recorded_once_for_the_credential_and_shard_in_force() -> None:
    twin, _ = applied(None, request(RegisterDevice, "d1", home_id="h1", device_type="lock", name="D"))
    credential = uuid.uuid4()
    twin, _ = applied(
        twin, request(IssueCredentials, "d1", credential_id=credential, password_hash=hash_secret("s"))
    )
    assert (
        applied(twin, request(RecordCredentialsLoaded, "d1", credential_id=uuid.uuid4(), shard="0"))[1] == []
    )
    assert applied(twin, request(RecordCredentialsLoaded, "d1", credential_id=credential, shard="1"))[1] == []
    twin, events = applied(twin, request(RecordCredentialsLoaded, "d1", credential_id=credential, shard="0"))
    assert [wire_name(type(e)) for e in events] == [wire_name(DeviceCredentialsLoaded)]
    assert twin is not None and twin.loaded_credential == credential
    assert applied(twin, request(RecordCredentialsLoaded, "d1", credential_id=credential, shard="0"))[1] == []


def facts(device_id: str, *reqs: Inbound) -> list[Event]:
    twin: Twin | None = None
    out: list[Event] = []
    for req in reqs:
        twin, events = applied(twin, req)
        out += events
    return out


def test_each_broker_holds_only_its_shard_s_credentials_and_follows_a_move() -> None:
    secret = hash_secret(new_secret())
    journal = facts(
        "d1",
        request(RegisterDevice, "d1", home_id="h1", device_type="lock", name="D", shard="1"),
        request(IssueCredentials, "d1", credential_id=uuid.uuid4(), password_hash=secret),
    )
    journal += facts(
        "sim", request(RegisterDevice, "sim", home_id="h1", device_type="lock", name="S", simulated=True)
    )
    brokers = {shard: MosquittoAccess(shard=shard) for shard in ("0", "1")}
    for event in journal:
        for access in brokers.values():
            access.apply(event)
    assert brokers["0"].password_file() == "" and brokers["1"].password_file() == f"d1:{secret}\n"
    assert list(brokers["1"].take_pending()) == ["d1"] and brokers["0"].pending == {}
    for access in brokers.values():  # the simulator hub may act for a simulated device on every broker
        assert "topic readwrite hearth/devices/sim/#" in access.acl_file(SERVICES_ACL)
    assert (brokers["0"].simulated_here(), brokers["1"].simulated_here()) == (["sim"], [])

    moved = DeviceShardMoved(
        event_id=uuid.uuid4(),
        device_id="d1",
        home_id="h1",
        version=3,
        occurred_at=NOW,
        recorded_at=NOW,
        payload=ShardMovedPayload(shard="0", from_shard="1"),
    )
    assert all(access.apply(moved) for access in brokers.values())  # both brokers' files change
    assert brokers["0"].password_file() == f"d1:{secret}\n" and brokers["1"].password_file() == ""


def test_a_snapshot_from_before_shards_restores_every_device_onto_the_default_shard() -> None:
    before = msgspec.msgpack.encode(
        {"format": 1, "hashes": {"d1": "h"}, "credential_ids": {"d1": "c"}, "simulated": [], "revoked": []}
    )
    access = MosquittoAccess(shard=DEFAULT_SHARD)
    access.restore(before)
    assert access.here("d1") and access.pending == {}
    saved = msgspec.msgpack.decode(access.snapshot(), type=AccessSnapshotV1)
    assert saved.shards == {} and saved.hashes == {"d1": "h"}


def stamped(twin: Twin | None, req: Inbound) -> list[Event]:
    return applied(twin, req)[1]


async def test_the_command_api_s_book_knows_each_device_s_shard_and_wakes_a_wait_for_its_loaded_secret() -> (
    None
):
    book = DeviceBook()
    twin, events = applied(
        None, request(RegisterDevice, "d1", home_id="h1", device_type="lock", name="D", shard="1")
    )
    credential = uuid.uuid4()
    twin, issued = applied(
        twin, request(IssueCredentials, "d1", credential_id=credential, password_hash=hash_secret("s"))
    )
    for event in (*events, *issued):
        book.apply(event)
    assert book.devices["d1"].shard == "1"
    assert await book.wait_credentials_loaded("d1", credential, 0.05) is False  # nothing said it yet
    waiting = asyncio.create_task(book.wait_credentials_loaded("d1", credential, 10))
    await eventually(lambda: credential in book._loading, "the answer to wait for the credential")
    for event in stamped(twin, request(RecordCredentialsLoaded, "d1", credential_id=credential, shard="1")):
        book.apply(event)
    assert await waiting is True
    assert await book.wait_credentials_loaded("d1", credential, 0) is True  # it stays known
    twin, moved = applied(twin, request(MoveDeviceShard, "d1", shard="0"))
    for event in moved:
        book.apply(event)
    restored = DeviceBook()
    restored.restore(book.snapshot())
    assert (book.devices["d1"].shard, restored.devices["d1"].shard) == ("0", "0")


async def test_a_gateway_publishes_only_its_own_shard_s_commands() -> None:
    published: list[str] = []

    def publish(topic: str, _payload: bytes) -> asyncio.Future[None]:
        published.append(topic)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    records = []
    for offset, (device_id, shard) in enumerate([("a", "0"), ("b", "1"), ("c", "1")]):
        command = DeviceCommand(
            command_id=uuid.uuid4(),
            device_id=device_id,
            name="lock",
            params={},
            expires_at=datetime.now(UTC) + timedelta(seconds=30),
            shard=shard,
        )
        records.append(
            ConsumerRecord("t", 0, offset, 0, 0, device_id.encode(), encode(command), None, 0, 0, [])
        )
    downlink = Downlink(None, publish, None, shard="1")  # type: ignore[arg-type]  # (neither is used here)
    await downlink._deliver({TopicPartition("t", 0): records})
    assert published == [commands_topic("b"), commands_topic("c")]
