"""The journal's wire format: the cheap type peek consumers use to skip facts, and the partitioner."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner

from hearth_shared.adapters.kafka import partition_of
from hearth_shared.schema.events import (
    CommandRequested,
    CommandRequestedPayload,
    DeviceRegistered,
    DeviceRegisteredPayload,
    StateReported,
    StateReportedPayload,
    decode_event,
    encode,
    fact_type,
    new_id,
    utcnow,
)

pytestmark = pytest.mark.unit


def envelope(version: int) -> dict[str, Any]:
    now = utcnow()
    return {
        "event_id": new_id(),
        "device_id": "t-1",
        "home_id": "h",
        "version": version,
        "occurred_at": now,
        "recorded_at": now,
    }


def test_fact_type_reads_the_wire_type_of_every_kind_of_fact() -> None:
    now = utcnow()
    command_id = new_id()
    facts = [
        DeviceRegistered(**envelope(1), payload=DeviceRegisteredPayload(device_type="thermostat", name="t")),
        CommandRequested(
            **envelope(2),
            payload=CommandRequestedPayload(
                command_id=command_id,
                name="set_target_temperature",
                params={"target_c": 21.0},
                expires_at=now,
            ),
        ),
        StateReported(
            **envelope(3),
            payload=StateReportedPayload(reported={"ambient_c": 20.5}, device_seq=1, device_time=now),
        ),
    ]
    for fact in facts:
        data = encode(fact)
        assert fact_type(data) == type(decode_event(data)).__struct_config__.tag
    assert [fact_type(encode(f)) for f in facts] == [
        "device.registered",
        "command.requested",
        "device.state_reported",
    ]


@pytest.mark.parametrize("data", [b"", b"not json", b"[1, 2]", b'{"kind": "report_state"}', b'{"type": 7}'])
def test_fact_type_of_a_record_without_one_is_empty(data: bytes) -> None:
    assert fact_type(data) == ""


def test_partition_of_matches_the_producers_default_partitioner() -> None:
    partitioner = DefaultPartitioner()
    partitions = list(range(12))
    for key in [b"t-1", b"lock-7", "thermostat-\u00e9".encode(), b"x" * 300]:
        assert partition_of(key, 12) == partitioner(key, partitions, partitions)
