"""Device slices (hearth_device_gateway.service.slices): every device belongs to exactly one of n slices,
all its channels to the same one, and a gateway's uplink leaves other slices' messages alone."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, cast

import pytest

from hearth_device_gateway.adapters.inbox_writer import InboxLanes
from hearth_device_gateway.entrypoints.uplink import Uplink
from hearth_device_gateway.service.slices import Slice
from hearth_shared.adapters.kafka import DeadLetters
from hearth_shared.adapters.topics import Topics
from hearth_shared.schema.events import decode_inbound
from tests.support.fakes import FakeBatchProducer
from tests.support.waiting import eventually

pytestmark = pytest.mark.unit

DEVICES = [f"thermo-{i}" for i in range(3000)]


def test_every_device_has_exactly_one_slice_for_all_its_channels() -> None:
    slices = [Slice(i, 3) for i in range(3)]
    owners: Counter[int] = Counter()
    for device in DEVICES:
        owning = {
            s.index for s in slices for channel in ("state", "acks", "availability")
            if s.owns(f"hearth/devices/{device}/{channel}")
        }  # fmt: skip
        assert len(owning) == 1, device
        owners[owning.pop()] += 1
    assert all(800 < n < 1200 for n in owners.values()), owners  # spread about evenly


def test_a_topic_without_a_device_goes_to_slice_0_and_a_slice_must_exist() -> None:
    assert Slice(0, 2).owns("nonsense") and not Slice(1, 2).owns("nonsense")
    with pytest.raises(ValueError, match="slice 2 of 2"):
        Slice(2, 2)


async def test_an_uplink_puts_only_its_slices_devices_on_the_inbox() -> None:
    producer, topics, part = FakeBatchProducer(), Topics("test"), Slice(0, 2)
    inbox = InboxLanes(producer, topics, batch_size=1000, linger_s=0.0)
    uplink = Uplink(inbox, cast(DeadLetters, None), _refused, owns=part.owns)
    body = b'{"seq": 1, "at": "2026-11-27T12:00:00+00:00", "state": {"ambient_c": 20.0}}'
    batch = [(f"hearth/devices/{d}/state", body) for d in DEVICES[:40]]
    handled = asyncio.create_task(uplink.handle_batch(batch))
    await eventually(lambda: bool(producer.sent), "a batch sent", timeout_s=2, every_s=0.001)
    producer.answer()
    await asyncio.wait_for(handled, 2)
    taken = {decode_inbound(v).device_id for _, v in producer.stored(topics.inbox)}
    mine = {d for d in DEVICES[:40] if part.owns(f"hearth/devices/{d}/state")}
    assert taken == mine and 0 < len(mine) < 40
    assert uplink.accepted == len(mine)


def _refused(*_: Any) -> None:
    raise AssertionError("nothing is refused here")
