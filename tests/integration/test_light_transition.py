"""A light through the real stack: registered as simulated, played by the simulator over MQTT, turned on
with a transition. Its reports on the way (the level between where it was and where it was asked) are
in the journal before the command converges, fail nothing, and the command converges once the level is
within tolerance, not before the transition could have ended; the twin shows its firmware version."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest

from hearth_devstack.supervision.process import ManagedProcess
from tests.integration.test_simulator_mqtt import simulator  # noqa: F401  (the fixture)
from tests.support.commands import final_command, send
from tests.support.platform import Platform
from tests.support.waiting import twin_when

pytestmark = pytest.mark.integration

TRANSITION_S = 4.0


async def test_a_light_converges_through_a_transition(
    platform: Platform,
    simulator: ManagedProcess,  # noqa: F811
) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with (
        platform.client(platform.command_api, home) as api,
        platform.client(platform.query_api, home) as query,
    ):
        body = {"home_id": home, "type": "light", "name": "Hall light", "simulated": True}
        registered = await api.post("/v1/devices", json=body)
        assert registered.status_code == 201, registered.text
        device_id = registered.json()["device_id"]
        twin = await twin_when(
            query, device_id, lambda t: t["connectivity"]["online"] and "brightness_pct" in t["reported"], 60
        )
        assert twin["firmware_version"] == twin["reported"]["firmware_version"] != ""
        off = await send(api, device_id, "turn_off", {})  # start from dark, whatever the bulb drew
        assert (await final_command(query, off.json()["command_id"], timeout_s=60))["status"] == "converged"

        sent = await send(
            api,
            device_id,
            "turn_on",
            {"brightness_pct": 95, "color_temp_k": 4000, "transition_s": TRANSITION_S},
        )
        assert sent.status_code == 202, sent.text
        command_id = sent.json()["command_id"]
        view = await final_command(query, command_id, timeout_s=60)
        assert view["status"] == "converged", view
        steps = {step["status"]: datetime.fromisoformat(step["at"]) for step in view["history"]}
        assert (steps["converged"] - steps["dispatched"]).total_seconds() >= TRANSITION_S * 0.9, steps

        events = await query.get(
            f"/v1/devices/{device_id}/events", params={"limit": 1000, "command_id": command_id}
        )
        assert events.status_code == 200, events.text
        facts = events.json()["items"]
        accepted = next(
            f["version"]
            for f in facts
            if f["type"] == "command.accepted" and f["correlation_id"] == command_id
        )
        converged = next(
            f["version"]
            for f in facts
            if f["type"] == "command.converged" and f["correlation_id"] == command_id
        )
        on_the_way = [
            f["payload"]["reported"]["brightness_pct"]
            for f in facts
            if f["type"] == "device.state_reported"
            and accepted < f["version"] < converged
            and "brightness_pct" in f["payload"]["reported"]
        ]
        assert any(1 <= level < 94 for level in on_the_way), on_the_way  # reports during the transition
        assert not any(f["type"] == "command.failed" and f["correlation_id"] == command_id for f in facts)

        final = await twin_when(query, device_id, lambda t: t["delta"] == {}, 30)
        assert final["reported"]["power"] == "on"
        assert abs(final["reported"]["brightness_pct"] - 95) <= 1
        assert abs(final["reported"]["color_temp_k"] - 4000) <= 50
