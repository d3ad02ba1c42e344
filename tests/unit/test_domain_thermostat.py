"""Thermostat rules: target range and step, the heat_cool pair, modes, and superseding."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hearth_shared.domain import CommandInvalid, CommandState, Twin, decide, validate_command
from hearth_shared.schema.events import (
    CommandAccepted,
    CommandDispatched,
    CommandRejected,
    CommandRejectedPayload,
    CommandRequested,
    CommandSuperseded,
    CommandSupersededPayload,
    DesiredSetPayload,
    DesiredStateSet,
    SubmitCommand,
)
from tests.support.inbox_requests import payload_of

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def thermostat(**fields: Any) -> Twin:
    defaults: dict[str, Any] = {
        "device_id": "t1",
        "home_id": "h1",
        "device_type": "thermostat",
        "name": "Hall",
        "desired": {},
        "reported": {"hvac_mode": "heat", "hvac_action": "idle", "target_c": 20.0},
        "version": 1,
        "updated_at": NOW,
    }
    return Twin(**{**defaults, **fields})


def submit(name: str, params: dict[str, Any]) -> SubmitCommand:
    return SubmitCommand(
        request_id=uuid.uuid4(),
        device_id="t1",
        sent_at=NOW,
        home_id="h1",
        command_id=uuid.uuid4(),
        name=name,
        params=params,
        expires_at=NOW + timedelta(minutes=5),
    )


def reason_of(params: dict[str, Any], name: str = "set_target_temperature") -> str:
    with pytest.raises(CommandInvalid) as raised:
        validate_command("thermostat", name, params)
    return raised.value.reason


def test_valid_target_is_normalized_to_float() -> None:
    assert validate_command("thermostat", "set_target_temperature", {"target_c": 21}) == {"target_c": 21.0}


@pytest.mark.parametrize("target", [6.5, 35.5, -3, 100])
def test_target_outside_7_to_35_is_out_of_range(target: float) -> None:
    assert reason_of({"target_c": target}) == "out_of_range"


def test_range_bounds_are_allowed() -> None:
    assert validate_command("thermostat", "set_target_temperature", {"target_c": 7.0}) == {"target_c": 7.0}
    assert validate_command("thermostat", "set_target_temperature", {"target_c": 35}) == {"target_c": 35.0}


def test_target_off_the_half_degree_step_is_invalid_step() -> None:
    assert reason_of({"target_c": 21.3}) == "invalid_step"


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"target_c": "warm"},
        {"target_c": True},
        {"target_c": 21, "target_low_c": 19},
        {"target_low_c": 19},
    ],
)
def test_malformed_target_params_are_invalid_params(params: dict[str, Any]) -> None:
    assert reason_of(params) == "invalid_params"


@pytest.mark.parametrize(("low", "high"), [(22.0, 20.0), (21.0, 21.0)])
def test_heat_cool_pair_needs_low_below_high(low: float, high: float) -> None:
    assert reason_of({"target_low_c": low, "target_high_c": high}) == "invalid_params"


def test_hvac_mode_must_be_a_known_mode() -> None:
    assert reason_of({"mode": "turbo"}, name="set_hvac_mode") == "invalid_params"
    assert validate_command("thermostat", "set_hvac_mode", {"mode": "auto"}) == {"mode": "auto"}


def test_unknown_command() -> None:
    assert reason_of({}, name="self_destruct") == "unknown_command"


def test_out_of_range_command_is_requested_then_rejected() -> None:
    changes = decide(thermostat(), submit("set_target_temperature", {"target_c": 40}), NOW)
    assert [c.event_type for c in changes] == [CommandRequested, CommandRejected]
    assert payload_of(changes[1], CommandRejectedPayload).reason == "out_of_range"


def test_pair_is_wrong_mode_outside_heat_cool_and_auto() -> None:
    changes = decide(
        thermostat(), submit("set_target_temperature", {"target_low_c": 19, "target_high_c": 23}), NOW
    )
    assert changes[-1].event_type is CommandRejected
    assert payload_of(changes[-1], CommandRejectedPayload).reason == "wrong_mode"


def test_single_target_is_wrong_mode_in_heat_cool() -> None:
    twin = thermostat(reported={"hvac_mode": "heat_cool"})
    changes = decide(twin, submit("set_target_temperature", {"target_c": 21}), NOW)
    assert payload_of(changes[-1], CommandRejectedPayload).reason == "wrong_mode"


def test_pair_is_accepted_once_heat_cool_is_desired() -> None:
    twin = thermostat(desired={"hvac_mode": "heat_cool"})
    changes = decide(twin, submit("set_target_temperature", {"target_low_c": 19, "target_high_c": 23}), NOW)
    assert [c.event_type for c in changes] == [CommandRequested, CommandAccepted, DesiredStateSet]
    assert payload_of(changes[-1], DesiredSetPayload).desired == {"target_low_c": 19.0, "target_high_c": 23.0}


def test_accepted_command_on_an_online_thermostat_is_dispatched_at_once() -> None:
    request = submit("set_hvac_mode", {"mode": "cool"})
    changes = decide(thermostat(online=True, last_seen=NOW), request, NOW)
    assert [c.event_type for c in changes] == [
        CommandRequested,
        CommandAccepted,
        DesiredStateSet,
        CommandDispatched,
    ]
    assert all(c.correlation_id == request.command_id for c in changes)


def test_newer_target_supersedes_a_held_target_but_not_a_held_mode() -> None:
    held_target, held_mode = (
        submit("set_target_temperature", {"target_c": 22}),
        submit("set_hvac_mode", {"mode": "cool"}),
    )
    twin = thermostat(
        commands={
            str(held_target.command_id): _held(held_target, "target", {"target_c": 22.0}),
            str(held_mode.command_id): _held(held_mode, "hvac_mode", {"hvac_mode": "cool"}),
        }
    )
    newer = submit("set_target_temperature", {"target_c": 23})
    changes = decide(twin, newer, NOW)
    superseded = [c for c in changes if c.event_type is CommandSuperseded]
    assert len(superseded) == 1
    assert payload_of(superseded[0], CommandSupersededPayload).command_id == held_target.command_id
    assert payload_of(superseded[0], CommandSupersededPayload).superseded_by == newer.command_id
    assert superseded[0].correlation_id == held_target.command_id


def _held(request: SubmitCommand, setting: str, desired: dict[str, Any]) -> CommandState:
    return CommandState(
        command_id=request.command_id,
        name=request.name,
        params=request.params,
        setting=setting,
        desired=desired,
        status="accepted",
        expires_at=request.expires_at,
        requested_at=NOW,
    )
