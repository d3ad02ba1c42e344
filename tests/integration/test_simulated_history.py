"""``hearth simulate --history`` (its body, ``simulate_history``) on the real stack: two days of two
homes' thermostats, registered, then published over MQTT with device time in the past, reach the journal
through the gateway and the device actor; the journal holds each manual change (a report carrying
``panel_changes``) at its routine's device time, and an outdoor series per home with a value for every
hour; the twins end online at the history's last moment (about now)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.schema.events import StateReported
from hearth_simulator.history import STEP_S, TELEMETRY_EVERY_S, Home, household_of
from hearth_simulator.history_writer import simulate_history
from hearth_simulator.registration import register_fleet
from tests.support.home_fleet import playing, simulator_endpoint
from tests.support.platform import Platform
from tests.support.topics import read_journal
from tests.support.waiting import eventually, twin_when

pytestmark = pytest.mark.integration

DAYS = 2
LATER_S = 600.0  # the history's window starts and ends at most this much after the homes were chosen
STAND_ASIDE_S = 10.0  # the live hub's silence after another writer's report (30 s by default)


def homes_at_home(prefix: str, count: int, span_s: float, seed: int, now: float) -> list[str]:
    """``count`` home ids whose households make changes over the ``span_s`` before ``now`` (not an away
    week: the households are drawn from the home ids, and an away week has days without any change).

    The history is written later, over ``span_s`` ending at its own "now" (after the homes' registration):
    only changes in the part of the span both windows cover count, ``[now - span_s + LATER_S, now)``. A
    change counted past ``now``, or in the seconds at the span's start that the later window leaves out,
    would be planned here and missing from the history (a CI run once saw 3 changes where 4 were counted)."""
    found: list[str] = []
    for n in range(1, 100):
        home_id = f"{prefix}-{n}"
        household, _ = household_of(home_id, seed)
        covered = household.changes(now - span_s + LATER_S, now, room=f"{home_id}-thermostat-1")
        if len(covered) >= 2 * span_s / 86_400:
            found.append(home_id)
        if len(found) == count:
            return found
    raise AssertionError("no household at home")


def longest_unmoved_s(outdoor_c: Callable[[float], float], start: float, end: float) -> float:
    """The longest stretch of ``[start, end]`` over which the outdoor temperature, rounded to 0.1 °C as
    the thermostat reports it, stays one value (sampled each minute)."""
    longest, since, value = 0.0, start, round(outdoor_c(start), 1)
    for t in range(int(start) + 60, int(end), 60):
        reported = round(outdoor_c(t), 1)
        if reported != value:
            longest, since, value = max(longest, t - since), float(t), reported
    return max(longest, end - since)


async def test_two_days_of_history_land_in_the_journal_at_their_device_times(
    platform: Platform, mosquitto: MosquittoBroker
) -> None:
    run = uuid.uuid4().hex[:6]
    began = time.time()
    home_ids = homes_at_home(f"hist-{run}", 2, DAYS * 86_400, seed=11, now=began)
    mqtt = simulator_endpoint(mosquitto)
    history, written = await simulate_history(
        platform.command_api,
        platform.token(),
        mqtt,
        home_ids,
        1,
        DAYS * 86_400,
        seed=11,
    )
    assert history.end - began < LATER_S  # the window homes_at_home counted in lies inside the history
    homes = [Home(room.home_id, (room.device_id,)) for room in history.rooms]
    assert written.devices == 2 and written.messages > DAYS * 24 * 4 * 2

    planned = history.manual_changes
    async with platform.client(platform.query_api) as query:
        for home in homes:
            device_id = home.thermostats[0]
            changes = planned[device_id]

            def every_change_taken(twin: dict[str, Any], n: int = len(changes)) -> bool:
                return bool(twin["reported"].get("panel_changes") == n)

            twin = await twin_when(query, device_id, every_change_taken, timeout_s=60)
            assert twin["reported"]["time_zone"] == household_of(home.home_id, 11)[1].time_zone
            assert twin["reported"]["target_c"] == changes[-1].target_c
            assert twin["connectivity"]["online"]  # weeks-old device times never took it offline

    journal = [
        fact
        for fact in await read_journal(platform.settings, skip_unreadable=True)
        if isinstance(fact, StateReported) and fact.home_id.startswith(f"hist-{run}-")
    ]
    for home in homes:
        device_id = home.thermostats[0]
        reports = [f for f in journal if f.device_id == device_id]
        # A fact holds only what changed: a manual change to the target already in force has no
        # target_c, so the target is carried forward from the facts before (in version order).
        manual, target = [], None
        for f in reports:
            target = f.payload.reported.get("target_c", target)
            if f.payload.reported.get("panel_changes", 0) > 0:
                manual.append((round(f.payload.device_time.timestamp()), target))
        assert manual == [(round(c.t), c.target_c) for c in planned[device_id]]
        assert len(manual) >= 2 * DAYS  # the routine's changes of two days
        for fact in reports:
            assert fact.occurred_at == fact.payload.device_time  # the device's clock, in the past
            assert fact.recorded_at.timestamp() >= began  # recorded by the platform now

        outdoor = sorted(
            f.payload.device_time.timestamp() for f in reports if "outdoor_c" in f.payload.reported
        )
        # a value changes the twin only when it moves (0.1 °C), so near the day's extremes an hour or two
        # may pass without one (a 3 °C daily swing stays within 0.1 °C of its low for two hours): no gap
        # is longer than the home's flattest stretch, plus the telemetry period that samples it
        gaps = [b - a for a, b in zip([history.start, *outdoor], [*outdoor, history.end], strict=True)]
        room = next(r for r in history.rooms if r.device_id == device_id)
        flattest_s = longest_unmoved_s(room.model.outside_c, history.start, history.end)
        # (and two minutes: the stretch is sampled each minute, and the history plays a step a minute)
        assert max(gaps) <= flattest_s + TELEMETRY_EVERY_S + 2 * STEP_S, (max(gaps), flattest_s)
        newest = max(f.payload.device_time for f in reports)
        assert newest.timestamp() == pytest.approx(history.end, abs=0.001)  # the last moment: about now
        assert history.end >= began


async def test_a_live_hub_stands_aside_for_a_history_and_plays_on_from_its_end(
    platform: Platform, mosquitto: MosquittoBroker
) -> None:
    """A device the live hub plays (the demo home under ``make up``) gets a day of history: every history
    report is taken (seqs above the hub's), the hub falls silent while they come, then plays the device
    on from the history's last state, its seqs above the history's and its device time now."""
    (home_id,) = homes_at_home(f"hist-{uuid.uuid4().hex[:6]}-live", 1, 86_400, seed=3, now=time.time())
    (device_id,) = await register_fleet(platform.command_api, platform.token(), home_id, {"thermostat": 1})
    mqtt = simulator_endpoint(mosquitto)

    async def reports() -> list[StateReported]:
        journal = await read_journal(platform.settings, skip_unreadable=True)
        return [f for f in journal if isinstance(f, StateReported) and f.device_id == device_id]

    # The test waits out the hub's silence after the history's last report (30 s of its 33 at the
    # default); the history's reports reach the journal far less than STAND_ASIDE_S apart (172 within
    # 0.7 s here, 0.1 s apart at most), so the hub never speaks between them.
    hub = playing(platform, {device_id}, mqtt, rate=2.0, stand_aside_s=STAND_ASIDE_S)
    async with hub, platform.client(platform.query_api) as query:
        await twin_when(query, device_id, lambda t: bool(t["connectivity"]["online"] and t["reported"]), 60)
        history, _ = await simulate_history(
            platform.command_api, platform.token(), mqtt, [home_id], 1, 86_400, seed=3
        )
        history_seqs = range(history.seq_base + 1, history.rooms[0].seq + 1)

        async def played_on() -> bool:
            return any(f.payload.device_seq > history_seqs[-1] for f in await reports())

        await eventually(played_on, "the live hub playing on after the history", timeout_s=90)
        changes = history.manual_changes[device_id]
        twin = await twin_when(query, device_id, lambda t: t["connectivity"]["online"], 30)
        assert twin["reported"]["target_c"] == changes[-1].target_c  # taken up from the history

    facts = await reports()
    # A fact holds only what changed: a manual change to the target already in force (the live hub's,
    # or the history's before it) has no target_c, so the target is carried forward in version order.
    manual, target = [], None
    for f in facts:
        target = f.payload.reported.get("target_c", target)
        if f.payload.device_seq in history_seqs and f.payload.reported.get("panel_changes", 0) > 0:
            manual.append((round(f.payload.device_time.timestamp()), target))
    assert manual == [(round(c.t), c.target_c) for c in changes]  # none of the history was dropped
    after = [f for f in facts if f.payload.device_seq > history_seqs[-1]]
    assert after[0].payload.device_time.timestamp() >= history.end  # live again, at the present
    assert after[0].payload.device_seq == history_seqs[-1] + 1
