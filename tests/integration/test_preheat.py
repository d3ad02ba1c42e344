"""Preheat on the real stack, on the simulator's physics: a room whose program raises its target at T
with ``preheat`` is at the target by T; the same room without it is still at its night temperature.

Two simulated thermostats alike (the simulator's ``SimThermostat``, played over MQTT by the fleet hub:
a fast heater, 960 °C/h, and a two-hour time constant against a steady 10 °C outside, so a preheat
lead is the shortest one, a minute, and the room gets there in a tenth of it), both held at 17 °C,
each with the room response its physics has appended to the home journal as ``hearth analytics learn``
publishes it (``test_learned_programs`` shows the job fitting such responses from the journal; here the
response is given, so the subject is the scheduler, the command path and the room). Both get a program:
19 °C at T, 20 s ahead, the first with ``preheat``. Its lead being longer than that, the automations
service starts the first at once (recorded as that transition, its run saying how early and why: the
exact second a lead starts is the unit tests'), the device heats, and by T its reports say it is within
the thermostat's band of the target; the second is sent at T and is still at 17 °C then.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.adapters.home_journal import append_home_facts
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.domain.home_facts import RoomResponseFitted
from hearth_shared.domain.room_response import ResponseFit, RoomResponse, preheat_lead
from hearth_shared.domain.schedule import DAYS, transition_command_id
from hearth_shared.schema.events import StateReported
from hearth_simulator.devices.sim_thermostat import SimThermostat
from hearth_simulator.outdoor import Outdoor
from tests.support.home_fleet import playing, simulator_endpoint
from tests.support.platform import Platform
from tests.support.registration import register_device
from tests.support.topics import read_journal
from tests.support.waiting import eventually, poll_until, twin_when

pytestmark = pytest.mark.integration

HEAT_C_PER_H, INSULATION_H, OUTSIDE_C = 960.0, 2.0, 10.0
AHEAD_S = 20  # T from the program's setting: less than the lead, more than the room needs
NIGHT_C, COMFORT_C = 17.0, 19.0
PHYSICS = RoomResponse(
    heating=ResponseFit(
        base_c_per_h=HEAT_C_PER_H, per_degree_per_h=-1 / INSULATION_H, samples=100, rmse_c_per_h=0.0
    ),
    idle=ResponseFit(base_c_per_h=0.0, per_degree_per_h=-1 / INSULATION_H, samples=100, rmse_c_per_h=0.0),
    fitted_from=datetime(2026, 1, 1, tzinfo=UTC),
    fitted_to=datetime(2026, 1, 2, tzinfo=UTC),
)


def room(now: float) -> SimThermostat:
    return SimThermostat(
        seed=0, rate=1.0, start=now, ambient_c=NIGHT_C, hvac_mode="heat", target_c=NIGHT_C,
        insulation_h=INSULATION_H, heat_c_per_h=HEAT_C_PER_H,
        outdoor=Outdoor(mean_c=OUTSIDE_C, day_swing_c=0.0),
    )  # fmt: skip


def response_fact(home: str, device_id: str) -> RoomResponseFitted:
    now = datetime.now(UTC)
    return RoomResponseFitted(
        fact_id=uuid.uuid4(), home_id=home, device_id=device_id, occurred_at=now, recorded_at=now,
        payload=PHYSICS,
    )  # fmt: skip


def ambient_at(journal: list[Any], device_id: str, moment: datetime) -> float:
    """The room's temperature its latest report at or before ``moment`` (device time) said."""
    reports = [
        f
        for f in journal
        if isinstance(f, StateReported)
        and f.device_id == device_id
        and f.payload.device_time <= moment
        and "ambient_c" in f.payload.reported
    ]
    latest = max(reports, key=lambda f: f.payload.device_time)
    return float(latest.payload.reported["ambient_c"])


async def command_view(query: httpx.AsyncClient, command_id: uuid.UUID) -> dict[str, Any] | None:
    response = await query.get(f"/v1/commands/{command_id}")
    return dict(response.json()) if response.status_code == 200 else None


async def test_a_preheated_room_is_at_its_target_at_the_programmed_time_and_the_other_is_not(
    platform: Platform,
    mosquitto: MosquittoBroker,
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    home: str,
) -> None:
    preheated = await register_device(api, home, "thermostat", "preheated", simulated=True)
    on_time = await register_device(api, home, "thermostat", "on time", simulated=True)
    rooms = {preheated: room, on_time: room}
    async with playing(platform, set(rooms), simulator_endpoint(mosquitto), rate=1.0, models=rooms):
        for device_id in rooms:
            await twin_when(query, device_id, lambda t: "ambient_c" in t["reported"], 60)
        producer = make_producer(platform.settings.kafka_bootstrap_servers, "test-preheat")
        await producer.start()
        try:
            await append_home_facts(
                producer, platform.settings.topics, [response_fact(home, d) for d in rooms]
            )
        finally:
            await producer.stop()

        lead = preheat_lead(PHYSICS, NIGHT_C, OUTSIDE_C, COMFORT_C)
        assert lead.lead_s == 60, lead  # the shortest lead: a step
        at = (datetime.now(UTC) + timedelta(seconds=AHEAD_S)).replace(microsecond=0)
        for device_id in rooms:
            entry = {
                "days": list(DAYS),
                "at": at.strftime("%H:%M:%S"),
                "command": {"name": "set_target_temperature", "params": {"target_c": COMFORT_C}},
                "preheat": device_id == preheated,
            }
            answer = await api.put(f"/v1/devices/{device_id}/schedule", json={"program": [entry]})
            assert answer.status_code == 200, answer.text

        commands = {d: transition_command_id(d, at) for d in rooms}
        for device_id, command_id in commands.items():
            await eventually(
                lambda c=command_id: command_view(query, c),
                f"{device_id}'s transition sent",
                timeout_s=lead.lead_s + 60,
            )
        early = await command_view(query, commands[preheated])
        late = await command_view(query, commands[on_time])
        assert early is not None and late is not None
        early_at = datetime.fromisoformat(early["requested_at"])
        # at once, give or take the automations service folding the program (the room needs ~6 s)
        assert at - timedelta(seconds=AHEAD_S + 1) <= early_at < at - timedelta(seconds=10), (
            at,
            early_at,
            early,
        )
        assert datetime.fromisoformat(late["requested_at"]) >= at, (at, late)
        schedule = await poll_until(
            lambda: query.get(f"/v1/devices/{preheated}/schedule"),
            lambda r: r.status_code == 200 and r.json()["last_preheat"] is not None,
            "the preheat's run in the schedule's view",
        )
        run = schedule.json()["last_preheat"]
        assert (run["lead_s"], run["reason"]) == (lead.lead_s, "reaches_target"), run

        # by T the preheated room is within the thermostat's band of its target; the other is not
        async def reported_past_t() -> bool:
            twins = [await twin_when(query, d, lambda t: True) for d in rooms]
            return all(datetime.fromisoformat(t["updated_at"]) > at + timedelta(seconds=2) for t in twins)

        await eventually(reported_past_t, "both rooms reported after T", timeout_s=30)
    journal = await read_journal(platform.settings, skip_unreadable=True)
    assert ambient_at(journal, preheated, at) >= COMFORT_C - SimThermostat.HYSTERESIS_C
    assert ambient_at(journal, on_time, at) <= NIGHT_C + 0.2
