"""The declarations a device type is made of: values checked by their schema, commands by their forms,
and a command with its own planner (how a command every type shares, an admin command, is declared)."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hearth_shared.domain import CommandInvalid, Twin, decide
from hearth_shared.domain.device_type import Command, Param, Value
from hearth_shared.domain.registry import DEVICE_TYPES
from hearth_shared.schema.events import DesiredSetPayload, DesiredStateSet, SubmitCommand
from tests.support.inbox_requests import payload_of

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 23, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "given", "reason"),
    [
        (Value("number", 0, 10, 0.5), 10.5, "out_of_range"),
        (Value("number", 0, 10, 0.5), 0.3, "invalid_step"),
        (Value("number"), float("nan"), "invalid_params"),
        (Value("integer", 1, 5), 2.5, "invalid_params"),
        (Value("string", values=("a", "b")), "c", "invalid_params"),
        (Value("string"), 3, "invalid_params"),
        (Value("boolean"), 1, "invalid_params"),
    ],
)
def test_a_value_out_of_its_schema_says_why(value: Value, given: Any, reason: str) -> None:
    with pytest.raises(CommandInvalid) as caught:
        value.check("k", given)
    assert caught.value.reason == reason


def test_a_command_takes_exactly_one_of_its_forms() -> None:
    n = Value("number")
    command = Command("c", ((Param("a", n),), (Param("b", n), Param("c", n, required=False))))
    assert command.validate({"a": 1}) == {"a": 1.0}
    assert command.validate({"b": 2}) == {"b": 2.0}
    with pytest.raises(CommandInvalid, match=r"takes \{a\} or \{b, c\?\}"):
        command.validate({"a": 1, "b": 2})
    assert command.params_schema()["oneOf"][1]["required"] == ["b"]


def _power_cycle(twin: Twin, command: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "power_cycle", {"boot_count": twin.reported.get("boot_count", 0) + 1}


@pytest.mark.parametrize("type_name", sorted(DEVICE_TYPES))
def test_a_command_with_its_own_planner_is_planned_alike_for_every_type(
    type_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (not "reboot": the admin module plans the platform's own admin commands before any type)
    shared = Command("power_cycle", admin=True, plan=_power_cycle)
    kind = DEVICE_TYPES[type_name]
    monkeypatch.setitem(DEVICE_TYPES, type_name, dataclasses.replace(kind, commands=(*kind.commands, shared)))
    twin = Twin(device_id="d1", home_id="h1", device_type=type_name, name="x", desired={},
                reported={"boot_count": 2}, version=1, updated_at=NOW, online=True)  # fmt: skip
    request = SubmitCommand(request_id=uuid.uuid4(), device_id="d1", sent_at=NOW, home_id="h1",
                            command_id=uuid.uuid4(), name="power_cycle", params={},
                            expires_at=NOW + timedelta(minutes=1))  # fmt: skip
    recorded = [c for c in decide(twin, request, NOW) if c.event_type is DesiredStateSet]
    assert len(recorded) == 1
    assert payload_of(recorded[0], DesiredSetPayload).desired == {"boot_count": 3}
    assert payload_of(recorded[0], DesiredSetPayload).setting == "power_cycle"
    assert DEVICE_TYPES[type_name].schema()["commands"]["power_cycle"]["admin"] is True
