"""The thermostat's and lock's retired setting facts (``thermostat.target_set``,
``thermostat.hvac_mode_set``, ``lock.desired_state_set``): journals still hold them, so each record is read
as the ``device.desired_set`` it means (the upcaster in the decode path), folds into the same twin,
projects the same history row (its name and bytes as on the wire), and still triggers the automations that
name it; nothing decides one any more, and their settings belong to their own types alone."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from hearth_read_models.projection.rules import Projection
from hearth_shared.domain import CommandState, Twin, evolve
from hearth_shared.domain.automation import Trigger, fact_names, fact_triggers
from hearth_shared.domain.registry import DEVICE_TYPES
from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.events import (
    RETIRED_SETTING_FACTS,
    DesiredSetPayload,
    DesiredStateSet,
    MalformedRecord,
    decode_event,
    encode,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
COMMAND = uuid.UUID("0a5e6b1c-2d3f-4a5b-8c6d-7e8f9a0b1c2d")
EVENT = uuid.UUID("1b6f7c2d-3e4a-4b6c-9d7e-8f9a0b1c2d3e")
# One retired fact of each name, as a journal holds it: (type, device type, setting, desired keys).
RETIRED = [
    ("thermostat.target_set", "thermostat", "target", {"target_c": 21.5}),
    ("thermostat.hvac_mode_set", "thermostat", "hvac_mode", {"hvac_mode": "cool"}),
    ("lock.desired_state_set", "lock", "lock", {"lock_state": "locked"}),
]


def old_record(wire_type: str, desired: dict[str, Any], setting: str | None) -> bytes:
    """The record the platform wrote before the fact was retired (``setting`` None: written before the
    payload had the field)."""
    payload: dict[str, Any] = {"command_id": str(COMMAND), "desired": desired}
    if setting is not None:
        payload["setting"] = setting
    return msgspec.json.encode(
        {
            "type": wire_type, "event_id": str(EVENT), "schema_version": 1, "device_id": "d1",
            "home_id": "h1", "version": 4, "occurred_at": "2026-11-20T08:00:00Z",
            "recorded_at": "2026-11-20T08:00:00.5Z", "causation_id": None, "correlation_id": str(COMMAND),
            "payload": payload,
        }
    )  # fmt: skip


def generic(setting: str, desired: dict[str, Any]) -> DesiredStateSet:
    """The ``device.desired_set`` the retired record means, envelope for envelope."""
    return DesiredStateSet(
        event_id=EVENT, device_id="d1", home_id="h1", version=4, occurred_at=NOW,
        recorded_at=NOW + timedelta(milliseconds=500), correlation_id=COMMAND,
        payload=DesiredSetPayload(command_id=COMMAND, desired=desired, setting=setting),
    )  # fmt: skip


def twin_awaiting(device_type: str) -> Twin:
    """A device with the command accepted (the fact before the desired keys' one), at version 3."""
    command = CommandState(
        command_id=COMMAND, name="a command", params={}, status="accepted",
        expires_at=NOW + timedelta(minutes=5), requested_at=NOW,
    )  # fmt: skip
    return Twin(
        device_id="d1", home_id="h1", device_type=device_type, name="Hall", desired={}, reported={},
        version=3, updated_at=NOW, commands={str(COMMAND): command},
    )  # fmt: skip


@pytest.mark.parametrize(("wire_type", "device_type", "setting", "desired"), RETIRED)
@pytest.mark.parametrize("written_with_setting", [True, False])
def test_a_retired_fact_reads_as_the_generic_one_it_means(
    wire_type: str, device_type: str, setting: str, desired: dict[str, Any], written_with_setting: bool
) -> None:
    record = old_record(wire_type, desired, setting if written_with_setting else None)

    read = decode_event(record)

    assert read == generic(setting, desired)
    assert decode_fact(record) == read  # the consumers' checked decode takes it too
    assert encode(read) != record  # read, not rewritten: the record on the wire stays what it was


@pytest.mark.parametrize(("wire_type", "device_type", "setting", "desired"), RETIRED)
def test_it_folds_into_the_twin_the_old_fact_made(
    wire_type: str, device_type: str, setting: str, desired: dict[str, Any]
) -> None:
    before = twin_awaiting(device_type)

    after = evolve(before, decode_event(old_record(wire_type, desired, None)))

    assert after == evolve(before, generic(setting, desired))
    assert after.desired == desired and after.version == 4
    assert after.commands[str(COMMAND)].setting == setting  # the supersede group, as its type named it


@pytest.mark.parametrize(("wire_type", "device_type", "setting", "desired"), RETIRED)
def test_its_history_row_keeps_the_name_and_bytes_on_the_wire(
    wire_type: str, device_type: str, setting: str, desired: dict[str, Any]
) -> None:
    record = old_record(wire_type, desired, None)
    projection = Projection({"d1": twin_awaiting(device_type)}, {}, collect_changes=True)

    projection.apply(decode_fact(record), record)

    [row] = projection.history
    assert (row.type, row.event, row.event_id, row.version) == (wire_type, record, EVENT, 4)
    assert projection.twins["d1"] == evolve(twin_awaiting(device_type), generic(setting, desired))
    [change] = projection.changes
    assert bytes(change.event) == record  # a live subscriber gets the record as the journal holds it


def test_a_new_fact_keeps_its_own_name_in_the_history() -> None:
    fact = generic("target", {"target_c": 21.5})
    projection = Projection({"d1": twin_awaiting("thermostat")}, {}, collect_changes=False)

    projection.apply(fact, encode(fact))

    assert [row.type for row in projection.history] == ["device.desired_set"]


@pytest.mark.parametrize(("wire_type", "device_type", "setting", "desired"), RETIRED)
def test_an_automation_on_the_retired_name_fires_on_old_and_new_facts(
    wire_type: str, device_type: str, setting: str, desired: dict[str, Any]
) -> None:
    on_retired = Trigger(fact=wire_type, device_id="d1")
    on_generic = Trigger(fact="device.desired_set")
    old, new = decode_event(old_record(wire_type, desired, None)), generic(setting, desired)

    for fact in (old, new):
        assert fact_names(fact) == ("device.desired_set", wire_type)
        assert fact_triggers(on_retired, fact_names(fact), "d1")
        assert fact_triggers(on_generic, fact_names(fact), "d1")
        assert not fact_triggers(on_retired, fact_names(fact), "d2")


def test_a_setting_no_retired_fact_recorded_answers_to_the_generic_name_only() -> None:
    light = generic("light", {"power": "on"})
    assert fact_names(light) == ("device.desired_set",)
    assert not fact_triggers(Trigger(fact="thermostat.target_set"), fact_names(light), "d1")


def test_each_retired_setting_belongs_to_its_own_type_alone() -> None:
    """A trigger on a retired name matches the generic fact by its setting: so no other type may declare
    a setting of that name, or a ``thermostat.target_set`` trigger would fire on it."""
    for wire_type, setting in RETIRED_SETTING_FACTS.items():
        owners = [t.name for t in DEVICE_TYPES.values() if setting in {s.name for s in t.settings}]
        assert owners == [wire_type.partition(".")[0]], (wire_type, owners)


def test_a_retired_name_at_a_version_it_never_had_is_still_unknown() -> None:
    record = msgspec.json.decode(old_record("thermostat.target_set", {"target_c": 20.0}, "target"))
    with pytest.raises(MalformedRecord) as raised:
        decode_event(msgspec.json.encode({**record, "schema_version": 2}))
    assert raised.value.reason == "unknown_type"
