"""A suggested program where a household looks, in Chromium (issue 22 points 2 and 5): a thermostat's
card shows its program (an entry with preheat says so, and how early its latest run started and why)
and, beside it, the open suggestion with what it was learned from; "Accept" on the page records the
decision through the command API, and the home journal's fold makes the suggested program the device's
program, on the page and at the query API. The ``schedule.suggested`` fact is published here as
``hearth analytics learn`` publishes it (tests/integration/test_learned_programs.py runs the learner
itself), and a preheat run's ``schedule.transition_fired`` as the scheduler writes it
(tests/unit/test_preheat_scheduler.py). A screenshot of the card with the suggestion open is saved in
the test's directory."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from hearth_shared.adapters.home_journal import append_home_fact
from hearth_shared.adapters.kafka import make_producer
from hearth_shared.domain.home_facts import (
    FiredPayload,
    ScheduleSuggested,
    ScheduleTransitionFired,
    SuggestionPayload,
)
from hearth_shared.domain.program_learning import WEEKDAYS, EntryEvidence, SuggestionEvidence
from hearth_shared.domain.room_response import Preheat
from hearth_shared.domain.schedule import ProgramEntry, ScheduledCommand, transition_command_id
from tests.support.live_browser import CHROMIUM, open_live_page, screenshot
from tests.support.platform import Platform
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is missing: run `make browser`"),
]

EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
PROGRAM = [  # the household's own: 20 degC at 07:00 every day, reached at 07:00 (preheat)
    {"days": EVERY_DAY, "at": "07:00", "preheat": True,
     "command": {"name": "set_target_temperature", "params": {"target_c": 20.0}}},
]  # fmt: skip
LEARNED = ((WEEKDAYS, "06:30", 21.0), (WEEKDAYS, "22:15", 17.0))


def suggestion(home: str, device_id: str) -> ScheduleSuggested:
    now = datetime.now(UTC)
    program = tuple(
        ProgramEntry(
            days=days, at=at, command=ScheduledCommand(name="set_target_temperature", params={"target_c": c})
        )
        for days, at, c in LEARNED
    )
    evidence = SuggestionEvidence(
        weeks=4, changes=38, regularity=0.9, timezone="UTC",
        first_change=now - timedelta(weeks=4), last_change=now - timedelta(days=1),
    )  # fmt: skip
    entries = tuple(EntryEvidence(weeks_seen=4, changes=19, regularity=0.95, spread_min=6.0) for _ in LEARNED)
    payload = SuggestionPayload(device_type="thermostat", program=program, evidence=evidence, entries=entries)
    return ScheduleSuggested(
        fact_id=uuid.uuid4(),
        home_id=home,
        device_id=device_id,
        occurred_at=now,
        recorded_at=now,
        payload=payload,
    )


def preheat_run(home: str, device_id: str) -> ScheduleTransitionFired:
    """Yesterday's 07:00 transition (UTC, the home's zone), started 40 minutes early to reach 20 degC."""
    instant = datetime.now(UTC).replace(hour=7, minute=0, second=0, microsecond=0) - timedelta(days=1)
    command_id = transition_command_id(device_id, instant)
    preheat = Preheat(lead_s=2400, reason="reaches_target", target_c=20.0, indoor_c=17.0, outdoor_c=2.0)
    payload = FiredPayload(
        command_id=command_id, instant=instant, local=instant, entry=0, reason="preheat",
        command=ScheduledCommand(name="set_target_temperature", params={"target_c": 20.0}), preheat=preheat,
    )  # fmt: skip
    started = instant - timedelta(seconds=preheat.lead_s)
    return ScheduleTransitionFired(
        fact_id=command_id, home_id=home, device_id=device_id, occurred_at=started, recorded_at=started,
        payload=payload,
    )  # fmt: skip


async def test_a_suggestion_accepted_on_the_page_becomes_the_program(
    platform: Platform, browser: Browser, command_api: str, thermostat: tuple[str, str], tmp_path: Path
) -> None:
    home, device_id = thermostat
    async with platform.client(command_api, home) as api:
        answer = await api.put(f"/v1/devices/{device_id}/schedule", json={"program": PROGRAM})
        assert answer.status_code in (200, 202), answer.text
    producer = make_producer(platform.settings.kafka_bootstrap_servers, "test-live-page-suggestions")
    await producer.start()
    try:
        for fact in (preheat_run(home, device_id), suggestion(home, device_id)):
            await append_home_fact(producer, platform.settings.topics, fact)
    finally:
        await producer.stop()

    async with open_live_page(browser, platform.query_api, platform.token(home), command_api) as (
        page,
        problems,
    ):
        card = page.locator(f'article[data-device-id="{device_id}"]')
        program = card.locator("section.schedule ol.program li.entry")
        await expect(program).to_have_count(1, timeout=30_000)
        await expect(program.locator(".days")).to_have_text(["Every day"])
        await expect(program.locator(".what")).to_have_text(["Set target · 20 °C"])
        preheat = program.first.locator(".preheat")
        await expect(preheat).to_have_text("preheat")
        await expect(preheat).to_have_attribute("title", "starts early, to reach it at 07:00")
        await expect(program.first.locator(".preheat-run")).to_have_text(
            "last started 40 min early: to reach its target in time", timeout=30_000
        )

        offered = card.locator("section.suggestion")
        await expect(offered.locator("h3")).to_have_text("Suggested program", timeout=30_000)
        await expect(offered.locator(".evidence")).to_have_text(
            "Learned from 38 changes you made over 4 weeks (90 % regular)"
        )
        entries = offered.locator("li.entry")
        await expect(entries.locator(".days")).to_have_text(["Mon\u2013Fri", "Mon\u2013Fri"])  # an en dash
        await expect(entries.locator(".at")).to_have_text(["06:30", "22:15"])
        await expect(entries.locator(".what")).to_have_text(["Set target · 21 °C", "Set target · 17 °C"])
        await card.screenshot(path=tmp_path / "card-suggestion.png")
        print(f"screenshot: {tmp_path / 'card-suggestion.png'}")

        await offered.get_by_role("button", name="Accept").click()
        await expect(program.locator(".at")).to_have_text(["06:30", "22:15"], timeout=30_000)
        await expect(program.locator(".what")).to_have_text(["Set target · 21 °C", "Set target · 17 °C"])
        await expect(offered).to_be_hidden(timeout=30_000)  # no longer open
        await screenshot(page, tmp_path / "live-page-accepted.png")
    assert problems == []

    async with platform.client(platform.query_api, home) as query:

        async def accepted() -> bool:
            answer = (await query.get(f"/v1/devices/{device_id}/schedule/suggestions")).json()
            return [s["status"] for s in answer["suggestions"]] == ["accepted"]

        await eventually(accepted, "the suggestion accepted at the query API")
        schedule = (await query.get(f"/v1/devices/{device_id}/schedule")).json()
    assert [(e["at"], e["command"]["params"]["target_c"]) for e in schedule["program"]] == [
        ("06:30", 21.0),
        ("22:15", 17.0),
    ]
