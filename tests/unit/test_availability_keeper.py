"""The availability keeper's rules, without a broker: whom it says offline for, and when."""

from __future__ import annotations

import uuid

import pytest

from hearth_device_gateway.service.availability_keeper import AvailabilityKeeper
from hearth_device_gateway.service.mosquitto_access import MosquittoAccess
from hearth_shared.schema.credentials import hash_secret
from hearth_shared.schema.mqtt import SIMULATOR_ACCOUNT, hub_availability_topic
from tests.unit.test_mosquitto_access import issued, registered, revoked

pytestmark = pytest.mark.unit

HUB = hub_availability_topic(SIMULATOR_ACCOUNT)


def keeper() -> tuple[AvailabilityKeeper, MosquittoAccess, list[tuple[str, bytes]]]:
    access, sent = MosquittoAccess(), []
    return AvailabilityKeeper(access, lambda topic, payload: sent.append((topic, payload))), access, sent


async def test_a_revoked_device_is_said_offline_once_caught_up_and_after_each_reload() -> None:
    keep, access, sent = keeper()
    old, new = uuid.uuid4(), uuid.uuid4()
    for fact in (issued("lock-1", old, hash_secret("a")), revoked("lock-1", old)):
        access.apply(fact)
    keep.revoked(["lock-1"])  # still catching up: nothing yet
    assert sent == []
    keep.caught_up()  # revoked while the follower was away: said now
    assert sent == [("hearth/devices/lock-1/availability", b"offline")]
    sent.clear()
    access.apply(issued("lock-2", new, hash_secret("b")))
    access.apply(revoked("lock-2", new))
    access.apply(issued("lock-2", uuid.uuid4(), hash_secret("c")))  # a new secret in the same batch
    keep.revoked(["lock-2"])
    assert sent == []  # it has a credential: it says online itself when it comes back


async def test_a_dropped_hub_takes_exactly_its_children_offline() -> None:
    keep, access, sent = keeper()
    for fact in (registered("sim-1", simulated=True), registered("real-1", simulated=False)):
        access.apply(fact)
    await keep.on_hub_message(HUB, b"offline")  # heard before catching up: acted on once caught up
    assert sent == []
    keep.caught_up()
    assert sent == [("hearth/devices/sim-1/availability", b"offline")]
    sent.clear()
    access.apply(registered("sim-2", simulated=True))
    await keep.on_hub_message(HUB, b"online")
    await keep.on_hub_message(HUB, b"")  # the retained message cleared: nothing
    await keep.on_hub_message(hub_availability_topic("another-hub"), b"offline")  # no children
    assert sent == []
    await keep.on_hub_message(HUB, b"offline")
    assert sorted(sent) == [(f"hearth/devices/{d}/availability", b"offline") for d in ("sim-1", "sim-2")]
    assert keep.published == {"hub_children": 3, "revoked": 0}
