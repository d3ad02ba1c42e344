"""Schedules on the real stack: a short program fires on time, in the home's zone, through the command
path; a person's command holds the device until the next transition; resume re-applies at once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from hearth_shared.domain.schedule import DAYS, resume_command_id, transition_command_id
from tests.support.registration import register_device
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

ZONE = "Europe/Berlin"


async def command_view(query: httpx.AsyncClient, command_id: uuid.UUID) -> dict[str, Any] | None:
    response = await query.get(f"/v1/commands/{command_id}")
    return dict(response.json()) if response.status_code == 200 else None


async def schedule_view(query: httpx.AsyncClient, device_id: str) -> dict[str, Any] | None:
    response = await query.get(f"/v1/devices/{device_id}/schedule")
    return dict(response.json()) if response.status_code == 200 else None


def entry(local: datetime, target_c: float) -> dict[str, Any]:
    return {
        "days": list(DAYS),
        "at": local.strftime("%H:%M:%S"),
        "command": {"name": "set_target_temperature", "params": {"target_c": target_c}},
    }


async def test_a_short_program_fires_on_time_and_a_persons_command_holds_it(
    api: httpx.AsyncClient, query: httpx.AsyncClient, home: str
) -> None:
    device_id = await register_device(api, home, "thermostat")
    response = await api.put(f"/v1/homes/{home}", json={"timezone": ZONE})
    assert response.status_code == 200, response.text
    tz = ZoneInfo(ZONE)
    first = (datetime.now(UTC) + timedelta(seconds=8)).replace(microsecond=0).astimezone(tz)
    second = first + timedelta(seconds=12)
    program = [entry(first, 21.0), entry(second, 18.0)]
    response = await api.put(f"/v1/devices/{device_id}/schedule", json={"program": program})
    assert response.status_code == 200, response.text

    # GET shows the coming transitions in local time with the zone's offset
    await eventually(lambda: schedule_view(query, device_id), "the schedule in the query API", timeout_s=10)
    view = await schedule_view(query, device_id)
    assert view is not None and view["timezone"] == ZONE
    assert [n["local"] for n in view["next"][:2]] == [
        first.replace(tzinfo=None).isoformat(),
        second.replace(tzinfo=None).isoformat(),
    ]
    assert view["next"][0]["utc_offset"] in ("+01:00", "+02:00")

    # the first transition is a command with the derived id, requested not before its instant, on time
    first_id = transition_command_id(device_id, first)
    await eventually(lambda: command_view(query, first_id), "the first transition's command", timeout_s=30)
    fired = await command_view(query, first_id)
    assert fired is not None and fired["params"] == {"target_c": 21.0}
    requested = datetime.fromisoformat(fired["requested_at"])
    assert first <= requested < first + timedelta(seconds=5), (first, requested)

    # a person's command holds the device until the next transition
    manual = await api.post(
        f"/v1/devices/{device_id}/commands",
        json={"name": "set_target_temperature", "params": {"target_c": 25}},
    )
    assert manual.status_code == 202, manual.text
    manual_id = manual.json()["command_id"]

    async def held() -> bool:
        view = await schedule_view(query, device_id)
        return view is not None and view["hold"] is not None and view["hold"]["command_id"] == manual_id

    await eventually(held, "the hold", timeout_s=10)
    view = await schedule_view(query, device_id)
    assert view is not None
    assert datetime.fromisoformat(view["hold"]["until"]) == second

    # ... and the next transition fires as usual, ending the hold
    second_id = transition_command_id(device_id, second)
    await eventually(lambda: command_view(query, second_id), "the second transition's command", timeout_s=30)

    async def hold_ended() -> bool:
        view = await schedule_view(query, device_id)
        return view is not None and view["hold"] is None

    await eventually(hold_ended, "the hold's end at the next transition", timeout_s=10)

    # another hold, then resume: the transition in force is applied again at once, under the resume's id
    again = await api.post(
        f"/v1/devices/{device_id}/commands",
        json={"name": "set_target_temperature", "params": {"target_c": 24}},
    )
    assert again.status_code == 202
    await eventually(held_by(query, device_id, again.json()["command_id"]), "the second hold", timeout_s=10)
    resumed = await api.post(f"/v1/devices/{device_id}/schedule/resume")
    assert resumed.status_code == 202, resumed.text
    resume_id = resume_command_id(device_id, second, uuid.UUID(resumed.json()["resume_id"]))
    await eventually(lambda: command_view(query, resume_id), "the resumed transition's command", timeout_s=20)
    reapplied = await command_view(query, resume_id)
    assert reapplied is not None and reapplied["params"] == {"target_c": 18.0}
    await eventually(hold_ended, "the hold's end on resume", timeout_s=10)

    # each transition was sent once: the first transition's command id is the only one at its instant
    assert (await command_view(query, first_id)) is not None


def held_by(query: httpx.AsyncClient, device_id: str, command_id: str) -> Any:
    async def check() -> bool:
        view = await schedule_view(query, device_id)
        return view is not None and view["hold"] is not None and view["hold"]["command_id"] == command_id

    return check


async def test_bad_programs_and_zones_are_422s_that_say_what_is_wrong(
    api: httpx.AsyncClient, home: str
) -> None:
    device_id = await register_device(api, home, "thermostat")
    response = await api.put(f"/v1/homes/{home}", json={"timezone": "Mars/Olympus"})
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "unknown_timezone"
    bad_target = [
        {
            "days": ["mon"],
            "at": "07:00",
            "command": {"name": "set_target_temperature", "params": {"target_c": 99}},
        }
    ]
    response = await api.put(f"/v1/devices/{device_id}/schedule", json={"program": bad_target})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "program", 0, "command"]
    bad_time = [
        {"days": ["mon"], "at": "7am", "command": {"name": "set_hvac_mode", "params": {"mode": "heat"}}}
    ]
    response = await api.put(f"/v1/devices/{device_id}/schedule", json={"program": bad_time})
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "invalid_time"
    response = await api.put("/v1/devices/no-such-device/schedule", json={"program": []})
    assert response.status_code == 404
    response = await api.put("/v1/homes/someone-elses-home", json={"timezone": "UTC"})
    assert response.status_code == 403
