"""Homes that act on their own, on the live page in Chromium (issue 13): a scheduled thermostat shows its
next transitions in the home's zone, a command sent from the page holds the schedule (shown, live) until
"Resume" ends the hold, and the home's automation that this command set off shows its run with the
status of the command it sent. Real stack (command API, device actor, automations service, projector,
query API); the test plays the thermostat. A screenshot is saved in the test's directory."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from playwright.async_api import Browser, expect

from tests.support.live_browser import CHROMIUM, open_live_page, open_more_controls, screenshot
from tests.support.platform import Platform

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is missing: run `make browser`"),
]

ZONE = "Europe/Berlin"
TIMES = ((time(6, 30), 21.0), (time(22, 15), 17.0))  # every day: 21 degC at 06:30, 17 degC at 22:15
PROGRAM = [
    {"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], "at": at.strftime("%H:%M"),
     "command": {"name": "set_target_temperature", "params": {"target_c": target}}}
    for at, target in TIMES
]  # fmt: skip


def coming_transitions(now: datetime, count: int) -> list[tuple[datetime, float]]:
    """The program's next ``count`` transitions after ``now`` (UTC instants, target), worked out here
    with zoneinfo alone: each day's wall time in the home's zone."""
    zone = ZoneInfo(ZONE)
    today = now.astimezone(zone).date()
    found = [
        (datetime.combine(today + timedelta(days=day), at, tzinfo=zone).astimezone(UTC), target)
        for day in range(3)
        for at, target in TIMES
    ]
    return sorted(t for t in found if t[0] > now)[:count]


def offset(local: datetime) -> str:
    minutes = int((local.utcoffset() or timedelta()).total_seconds() // 60)
    return f"{'+' if minutes >= 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


async def test_a_schedule_its_hold_and_an_automations_run_show_on_the_page(
    platform: Platform,
    browser: Browser,
    command_api: str,
    thermostat: tuple[str, str],
    tmp_path: Path,
) -> None:
    home, device_id = thermostat
    lock_id = f"lock-{uuid.uuid4().hex[:8]}"  # never heard from: an automation's command to it is held
    async with platform.client(command_api) as admin, platform.client(command_api, home) as api:
        body = {"device_id": lock_id, "home_id": home, "type": "lock", "name": "Front door"}
        assert (await admin.post("/v1/devices", json=body)).status_code == 201
        assert (await api.put(f"/v1/homes/{home}", json={"timezone": ZONE})).status_code == 200
        answer = await api.put(f"/v1/devices/{device_id}/schedule", json={"program": PROGRAM})
        assert answer.status_code in (200, 202), answer.text
        rule = {
            "home_id": home,
            "name": "Lock up when the heating is set",
            "trigger": {"fact": "command.converged", "device_id": device_id},
            "actions": [{"command": {"device_id": lock_id, "name": "lock", "params": {}}}],
        }
        answer = await api.post("/v1/automations", json=rule)
        assert answer.status_code == 201, answer.text
        automation_id = answer.json()["automation_id"]
        expected = coming_transitions(datetime.now(UTC), 3)

        async with open_live_page(browser, platform.query_api, platform.token(home), command_api) as (
            page,
            problems,
        ):
            card = page.locator(f'article[data-device-id="{device_id}"]')
            schedule = card.locator("section.schedule")
            await expect(schedule.locator("h3")).to_have_text(f"Schedule · {ZONE}", timeout=30_000)
            transitions = schedule.locator("li.transition")
            at = [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t, _ in expected]
            for i, (instant, target) in enumerate(expected):
                local = instant.astimezone(ZoneInfo(ZONE))
                item = transitions.nth(i)
                await expect(item).to_have_attribute("data-at", at[i])
                await expect(item.locator(".when")).to_have_text(
                    f"{local.strftime('%a').lower()} {local.strftime('%m-%d %H:%M')} ({offset(local)})"
                )
                await expect(item.locator(".what")).to_have_text(f"Set target · {target:g} °C")
            await expect(transitions).to_have_count(3)
            await expect(schedule.locator(".hold")).to_have_count(0)

            await open_more_controls(card)
            await card.locator('input[name="target_c"]').fill("22.5")  # a person's command: a hold
            await card.get_by_role("button", name="Set target").click()
            await expect(card.locator(".command").first).to_have_attribute(
                "data-status", "converged", timeout=30_000
            )
            hold = schedule.locator(".hold")
            await expect(hold).to_contain_text("Held by a person's command until", timeout=30_000)
            await expect(hold.locator("time")).to_have_attribute("datetime", expected[0][0].isoformat())
            first = expected[0][0].astimezone(ZoneInfo(ZONE))  # shown on the home's clock
            await expect(hold.locator("time")).to_have_text(first.strftime("%a %H:%M").lower())
            await expect(schedule).not_to_contain_text("null")

            automation = page.locator(f'li.automation[data-automation-id="{automation_id}"]')
            await expect(automation.locator("header")).to_contain_text("Lock up when the heating is set")
            run = automation.locator("li.run").first
            await expect(run).to_have_attribute("data-fired", "true", timeout=30_000)
            await expect(run.locator(".what")).to_contain_text(f"command.converged of {device_id} · fired")
            action = run.locator('.action[data-kind="command"]')
            await expect(action).to_have_attribute("data-status", "accepted", timeout=30_000)  # held: offline
            await expect(action).to_contain_text(f"lock → {lock_id} accepted")
            await screenshot(page, tmp_path / "live-page-schedule.png")

            await hold.get_by_role("button", name="Resume").click()
            await expect(schedule.locator(".hold")).to_have_count(0, timeout=30_000)
        assert problems == []
