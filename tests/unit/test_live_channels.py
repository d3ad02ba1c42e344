"""The messages the projector and a rebuild publish are what the query side's hub and feed read: one
shape, declared in ``hearth_read_models.store.live_channels``."""

from __future__ import annotations

import msgspec

from hearth_read_models.store.live_channels import (
    CHANGE,
    SNAPSHOT,
    change_message,
    decode_published,
    home_channel,
    twin_key,
)


def test_a_change_carries_its_fact_as_on_the_wire_and_the_hub_reads_its_type_device_and_version() -> None:
    wire = b'{"type":"device.state_reported","version":7}'
    message = change_message(CHANGE, "th-1", 7, {"version": 7}, msgspec.Raw(wire))
    assert msgspec.json.decode(message) == {
        "type": "change",
        "device_id": "th-1",
        "version": 7,
        "twin": {"version": 7},
        "event": {"type": "device.state_reported", "version": 7},
    }
    published = decode_published(message)
    assert (published.type, published.device_id, published.version) == ("change", "th-1", 7)


def test_a_snapshot_has_no_event() -> None:
    message = msgspec.json.decode(change_message(SNAPSHOT, "lock-1", 3, {"version": 3}))
    assert message == {"type": "snapshot", "device_id": "lock-1", "version": 3, "twin": {"version": 3}}


def test_keys_and_channels_are_apart_per_device_and_home() -> None:
    assert twin_key("a") != twin_key("b") and home_channel("a") != home_channel("b")
    assert twin_key("a") != home_channel("a")
