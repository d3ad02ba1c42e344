"""Light rules: params by the schema, power and levels desired, convergence within 1 % and 50 K, and a
report on the way through a transition that fails nothing and converges nothing too early."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hearth_shared.domain import CommandInvalid, CommandState, Twin, decide, twin_delta, validate_command
from hearth_shared.domain.registry import DEVICE_TYPES
from hearth_shared.schema.events import (
    CommandAccepted,
    CommandConverged,
    CommandDispatched,
    CommandRequested,
    DesiredSetPayload,
    DesiredStateSet,
    ReportState,
    StateReported,
    SubmitCommand,
)
from tests.support.inbox_requests import payload_of

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 23, 20, tzinfo=UTC)
COMMAND_ID = uuid.uuid4()
LIGHT = DEVICE_TYPES["light"]


def light(**fields: Any) -> Twin:
    defaults: dict[str, Any] = {
        "device_id": "li1",
        "home_id": "h1",
        "device_type": "light",
        "name": "Hall light",
        "desired": {},
        "reported": {"power": "off", "brightness_pct": 40, "color_temp_k": 2700},
        "version": 3,
        "online": True,
        "last_seen": NOW,
        "updated_at": NOW,
        "last_device_seq": 5,
    }
    return Twin(**{**defaults, **fields})


def submit(name: str, params: dict[str, Any]) -> SubmitCommand:
    return SubmitCommand(request_id=uuid.uuid4(), device_id="li1", sent_at=NOW, home_id="h1",
                         command_id=COMMAND_ID, name=name, params=params,
                         expires_at=NOW + timedelta(minutes=1))  # fmt: skip


def report(seq: int, **state: Any) -> ReportState:
    return ReportState(request_id=uuid.uuid4(), device_id="li1", sent_at=NOW, device_seq=seq,
                       device_time=NOW, state=state)  # fmt: skip


def acknowledged(desired: dict[str, Any]) -> dict[str, CommandState]:
    command = CommandState(
        command_id=COMMAND_ID,
        name="turn_on",
        params={},
        setting="light",
        desired=desired,
        status="acknowledged",
        expires_at=NOW + timedelta(minutes=1),
        requested_at=NOW,
    )
    return {str(COMMAND_ID): command}


@pytest.mark.parametrize(
    ("name", "params", "normalized"),
    [
        ("turn_on", {}, {}),
        ("turn_on", {"brightness_pct": 60.0, "transition_s": 2}, {"brightness_pct": 60, "transition_s": 2.0}),
        ("turn_on", {"color_temp_k": 6500, "brightness_pct": 1}, {"color_temp_k": 6500, "brightness_pct": 1}),
        ("turn_off", {"transition_s": 60}, {"transition_s": 60.0}),
        ("turn_off", {}, {}),
    ],
)
def test_valid_params_are_normalized(name: str, params: dict[str, Any], normalized: dict[str, Any]) -> None:
    assert validate_command("light", name, params) == normalized


@pytest.mark.parametrize(
    ("name", "params", "reason"),
    [
        ("turn_on", {"brightness_pct": 0}, "out_of_range"),
        ("turn_on", {"brightness_pct": 101}, "out_of_range"),
        ("turn_on", {"brightness_pct": 50.5}, "invalid_params"),
        ("turn_on", {"color_temp_k": 1999}, "out_of_range"),
        ("turn_on", {"color_temp_k": 7000}, "out_of_range"),
        ("turn_on", {"transition_s": 61}, "out_of_range"),
        ("turn_on", {"transition_s": -1}, "out_of_range"),
        ("turn_on", {"brightness_pct": "bright"}, "invalid_params"),
        ("turn_on", {"brightness_pct": True}, "invalid_params"),
        ("turn_on", {"hue": 120}, "invalid_params"),
        ("turn_off", {"brightness_pct": 50}, "invalid_params"),
        ("blink", {}, "unknown_command"),
    ],
)
def test_bad_params_say_what_is_wrong(name: str, params: dict[str, Any], reason: str) -> None:
    with pytest.raises(CommandInvalid) as caught:
        validate_command("light", name, params)
    assert caught.value.reason == reason


def test_turn_on_desires_power_and_the_levels_asked_not_the_transition() -> None:
    changes = decide(light(), submit("turn_on", {"brightness_pct": 80, "transition_s": 5}), NOW)
    assert [c.event_type for c in changes] == [
        CommandRequested,
        CommandAccepted,
        DesiredStateSet,
        CommandDispatched,
    ]
    desired_set = payload_of(changes[2], DesiredSetPayload)
    assert desired_set.desired == {"power": "on", "brightness_pct": 80}
    assert desired_set.setting == "light"


def test_turn_off_desires_power_off() -> None:
    changes = decide(light(), submit("turn_off", {"transition_s": 3}), NOW)
    assert payload_of(changes[2], DesiredSetPayload).desired == {"power": "off"}


def test_converged_within_one_percent_and_fifty_kelvin() -> None:
    desired = {"power": "on", "brightness_pct": 50, "color_temp_k": 4000}
    assert LIGHT.converged(desired, {"power": "on", "brightness_pct": 51, "color_temp_k": 3950})
    assert LIGHT.converged(desired, {"power": "on", "brightness_pct": 49, "color_temp_k": 4050})
    assert not LIGHT.converged(desired, {"power": "on", "brightness_pct": 52, "color_temp_k": 4000})
    assert not LIGHT.converged(desired, {"power": "on", "brightness_pct": 50, "color_temp_k": 4051})
    assert not LIGHT.converged(desired, {"power": "off", "brightness_pct": 50, "color_temp_k": 4000})


def test_a_report_during_a_transition_is_no_divergence_and_the_end_of_it_converges() -> None:
    desired = {"power": "on", "brightness_pct": 90}
    twin = light(desired=desired, commands=acknowledged(desired))
    midway = decide(twin, report(6, power="on", brightness_pct=45), NOW)
    assert [c.event_type for c in midway] == [StateReported]  # neither failed nor converged
    assert twin_delta(twin) == {"power": "on", "brightness_pct": 90}
    arrived = decide(twin, report(7, power="on", brightness_pct=89), NOW)
    assert [c.event_type for c in arrived] == [StateReported, CommandConverged]


def test_the_delta_uses_the_same_tolerances() -> None:
    twin = light(desired={"power": "on", "brightness_pct": 70, "color_temp_k": 3000},
                 reported={"power": "on", "brightness_pct": 69, "color_temp_k": 3040})  # fmt: skip
    assert twin_delta(twin) == {}
    assert twin_delta(light(desired={"brightness_pct": 70}, reported={"brightness_pct": 68})) == {
        "brightness_pct": 70
    }


def test_on_minutes_and_brightness_are_rolled_up_and_nothing_is_scored() -> None:
    assert [m.name for m in LIGHT.minutes] == ["on_minutes"]
    assert [k.name for k in LIGHT.state if k.rollup] == ["brightness_pct"]
    assert all(k.baseline is None for k in LIGHT.state)
