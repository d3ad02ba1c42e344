"""Suggested programs and rooms' responses, end to end on the real stack: four weeks of two homes'
simulated history (the simulator's history writer, through MQTT, the gateway and the device actor) ->
``hearth analytics learn`` (Spark, the session's one) -> a ``schedule.suggested`` and a
``room.response_fitted`` fact per thermostat on the home journal -> the query API lists the suggestion ->
accepting it through the command API changes the device's schedule through the home journal (rejecting
the other changes nothing); a second run on the same history publishes nothing new."""

from __future__ import annotations

import itertools
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hearth_analytics.jobs.learn import learn
from hearth_analytics.settings import AnalyticsSettings
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.domain.home_facts import HomeFact, ScheduleSuggestionAccepted, decode_home_fact
from hearth_shared.domain.program_learning import WEEKDAYS
from hearth_shared.schema.events import MalformedRecord, StateReported
from hearth_simulator.history import household_of
from hearth_simulator.history_writer import simulate_history
from tests.support.home_fleet import simulator_endpoint
from tests.support.platform import Platform
from tests.support.topics import read_journal, read_topic
from tests.support.waiting import eventually, poll_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # Spark on 2 loaded cores

WEEKS = 4
SEED = 5


def steady_homes(prefix: str, count: int, span_s: float) -> list[str]:
    """``count`` home ids whose households have no away week over the span and whose weekday habits are
    an hour apart or more (so the test can say which entry each habit must become)."""
    now, found = time.time(), []
    first = datetime.fromtimestamp(now - span_s, UTC).date()
    # The households live by local dates, up to a day either side of UTC's: a week more each side.
    mondays = [first - timedelta(days=first.weekday()) + timedelta(weeks=w) for w in range(-1, WEEKS + 2)]
    for n in range(1, 200):
        home_id = f"{prefix}-{n}"
        household, _ = household_of(home_id, SEED)
        minutes = sorted(c.minute for c in household.routine.weekday)
        apart = all(b - a >= 60 for a, b in itertools.pairwise(minutes))
        if apart and not any(household.is_away_week(monday) for monday in mondays):
            found.append(home_id)
        if len(found) == count:
            return found
    raise AssertionError("no steady household")


def _minute(at: str) -> int:
    return int(at[:2]) * 60 + int(at[3:5])


async def test_a_learned_program_is_suggested_and_accepting_it_changes_the_schedule(
    platform: Platform, mosquitto: MosquittoBroker, spark: Any, tmp_path: Path
) -> None:
    span_s = WEEKS * 7 * 86_400
    home_ids = steady_homes(f"learn-{uuid.uuid4().hex[:6]}", 2, span_s)
    history, written = await simulate_history(
        platform.command_api, platform.token(), simulator_endpoint(mosquitto), home_ids, 1, span_s, seed=SEED
    )
    devices = {room.device_id: room.home_id for room in history.rooms}

    async def every_report_journaled() -> bool:
        journal = await read_journal(platform.settings, skip_unreadable=True)
        reports = [f for f in journal if isinstance(f, StateReported) and f.device_id in devices]
        return len(reports) >= written.messages

    await eventually(every_report_journaled, "every history report in the journal", timeout_s=240)

    settings = AnalyticsSettings(
        stack=platform.settings,
        archive_url=str(tmp_path / "no-archive"),
        checkpoint_dir=tmp_path / "checkpoints",
    )
    learned = learn(spark, settings)
    suggestions = {s.device_id: s for s in learned.suggestions if s.device_id in devices}
    responses = {r.device_id: r for r in learned.responses if r.device_id in devices}
    assert set(suggestions) == set(responses) == set(devices)

    for device_id, home_id in devices.items():
        household, _ = household_of(home_id, SEED)
        s = suggestions[device_id]
        assert s.home_id == home_id and s.payload.evidence.weeks >= WEEKS
        assert s.payload.evidence.timezone == household.time_zone
        weekday = [e for e in s.payload.program if e.days == WEEKDAYS]
        # every weekday habit of the household, at its time (to the jitter and the 5-minute rounding)
        assert len(weekday) == len(household.routine.weekday), s.payload.program
        for habit, entry in zip(
            sorted(household.routine.weekday, key=lambda c: c.minute), weekday, strict=True
        ):
            assert abs(_minute(entry.at) - habit.minute) <= 10, (habit, entry)
            assert entry.command.params["target_c"] == habit.target_c, (habit, entry)
        heating = responses[device_id].payload.heating
        assert heating is not None
        assert 2.0 <= heating.base_c_per_h <= 6.0, heating  # the simulator's heaters: 2.5-5 °C/h
        assert -0.3 <= heating.per_degree_per_h <= -0.05, heating  # its rooms' time constants: 5-12 h

    accepted_id, rejected_id = sorted(devices)
    accepted = suggestions[accepted_id]
    async with (
        platform.client(platform.command_api, devices[accepted_id]) as api,
        platform.client(platform.query_api, devices[accepted_id]) as query,
    ):
        listed = await poll_until(
            lambda: query.get(f"/v1/devices/{accepted_id}/schedule/suggestions"),
            lambda r: r.status_code == 200,
            "the suggestion in the query API",
        )
        (shown,) = listed.json()["suggestions"]
        assert shown["suggestion_id"] == str(accepted.fact_id) and shown["status"] == "open"
        assert shown["evidence"]["weeks"] == accepted.payload.evidence.weeks
        assert (await query.get(f"/v1/devices/{accepted_id}/schedule")).status_code == 404  # nothing yet

        answer = await api.post(f"/v1/devices/{accepted_id}/schedule/suggestions/{accepted.fact_id}/accept")
        assert answer.status_code == 202, answer.text
        schedule = await poll_until(
            lambda: query.get(f"/v1/devices/{accepted_id}/schedule"),
            lambda r: r.status_code == 200,
            "the accepted program as the device's schedule",
        )
        assert schedule.json()["program"] == shown["program"]
        decided = (await query.get(f"/v1/devices/{accepted_id}/schedule/suggestions")).json()["suggestions"]
        assert decided[0]["status"] == "accepted"

    rejected = suggestions[rejected_id]
    async with (
        platform.client(platform.command_api, devices[rejected_id]) as api,
        platform.client(platform.query_api, devices[rejected_id]) as query,
    ):
        await poll_until(
            lambda: query.get(f"/v1/devices/{rejected_id}/schedule/suggestions"),
            lambda r: r.status_code == 200,
            "the other suggestion in the query API",
        )
        answer = await api.post(f"/v1/devices/{rejected_id}/schedule/suggestions/{rejected.fact_id}/reject")
        assert answer.status_code == 202
        await poll_until(
            lambda: query.get(f"/v1/devices/{rejected_id}/schedule/suggestions"),
            lambda r: r.json()["suggestions"][0]["status"] == "rejected",
            "the rejection",
        )
        assert (await query.get(f"/v1/devices/{rejected_id}/schedule")).status_code == 404

    def readable(value: bytes | None) -> HomeFact | None:
        try:
            return decode_home_fact(value)
        except MalformedRecord:
            return None  # the session's shared topics hold the poison tests' records

    home_facts = await read_topic(platform.settings, platform.settings.topics.home_journal, readable)
    (acceptance,) = [
        f for f in home_facts if isinstance(f, ScheduleSuggestionAccepted) and f.device_id == accepted_id
    ]
    assert acceptance.payload.suggestion_id == accepted.fact_id  # the schedule changed through the journal

    again = learn(spark, settings)  # the same history: nothing new for these devices
    assert not [f for f in [*again.suggestions, *again.responses] if f.device_id in devices]
    assert again.already_published >= 2 * len(devices)
