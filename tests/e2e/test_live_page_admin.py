"""Administration on the live page, in Chromium (issue 12): a device quarantined by an admin is marked
with its reason and its controls are disabled, live, and enabled again on release; an admin page shows
the firmware campaigns, each wave's jobs as counts (succeeded, failed, in progress, queued) that move as
the campaign driver records them. Real stack: the command API, the device actor, the campaign driver, the
projector and the query API; the test plays the devices. A screenshot of each is saved in the test's
directory."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from tests.support.campaigns import start_recorded_campaign
from tests.support.device_link import DeviceLink
from tests.support.live_browser import CHROMIUM, open_live_page, screenshot
from tests.support.platform import Platform

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is missing: run `make browser`"),
]

SHA = "7a" * 32
LIGHT = {"power": "off", "brightness_pct": 40, "color_temp_k": 3000, "firmware_version": "1.0.0"}


async def test_a_quarantined_device_is_marked_and_its_controls_disabled_live(
    platform: Platform,
    browser: Browser,
    command_api: str,
    thermostat: tuple[str, str],
    tmp_path: Path,
) -> None:
    home, device_id = thermostat
    async with (
        open_live_page(browser, platform.query_api, platform.token(home), command_api) as (page, problems),
        platform.client(command_api) as admin,
    ):
        card = page.locator(f'article[data-device-id="{device_id}"]')
        set_target = card.locator("form.command-set_target_temperature button")
        raise_target = card.get_by_role("button", name="Target up")  # the card's lead
        await expect(set_target).to_be_enabled(timeout=30_000)
        await expect(raise_target).to_be_enabled()
        await expect(card.locator(".admin-controls")).to_have_count(0)  # a home page has none

        answer = await admin.post(f"/v1/devices/{device_id}/quarantine", json={"reason": "smells of smoke"})
        assert answer.status_code == 202, answer.text
        await expect(card).to_have_class("device quarantined", timeout=30_000)
        await expect(card.locator(".quarantine")).to_contain_text("Quarantined · smells of smoke")
        await expect(set_target).to_be_disabled()
        await expect(raise_target).to_be_disabled()
        await expect(card.locator('.lead .choice select[name="mode"]')).to_be_disabled()
        await expect(card.locator('form.command-set_hvac_mode select[name="mode"]')).to_be_disabled()
        await screenshot(page, tmp_path / "live-page-quarantined.png")

        assert (await admin.delete(f"/v1/devices/{device_id}/quarantine")).status_code == 204
        await expect(card).to_have_class("device", timeout=30_000)
        await expect(card.locator(".quarantine")).to_be_hidden()
        await expect(set_target).to_be_enabled()
        await expect(raise_target).to_be_enabled()
    assert problems == []


@pytest.fixture
async def light_fleet(platform: Platform, home: str) -> AsyncIterator[list[str]]:
    """Four lights of ``home``, as a campaign takes them: the first installs what it is sent and reports
    the new version, the second refuses it (``checksum_mismatch``), the third and fourth were never
    heard from (offline: a command to them is held)."""
    ids = [f"light-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    async with DeviceLink(platform.settings) as link:  # first: a device speaks once registered after it
        async with platform.client(platform.command_api) as admin:
            for i, device_id in enumerate(ids):
                body = {"device_id": device_id, "home_id": home, "type": "light", "name": f"Lamp {i + 1}"}
                assert (await admin.post("/v1/devices", json=body)).status_code == 201

        async def play(device_id: str, installs: bool) -> None:
            state = dict(LIGHT)
            while True:
                await link.report(device_id, state)
                try:
                    command = await link.next_command(device_id, timeout_s=2)
                except TimeoutError:
                    continue
                if command.name != "update_firmware":
                    continue
                await link.ack(
                    device_id, command.command_id, ok=installs, reason="" if installs else "checksum_mismatch"
                )
                if installs:
                    state["firmware_version"] = command.params["version"]

        players = [asyncio.create_task(play(ids[0], True)), asyncio.create_task(play(ids[1], False))]
        yield ids
        for player in players:
            player.cancel()


async def test_an_admin_page_shows_a_campaign_and_its_waves_counts(
    platform: Platform,
    browser: Browser,
    command_api: str,
    home: str,
    light_fleet: list[str],
    tmp_path: Path,
) -> None:
    async with (
        open_live_page(browser, platform.query_api, platform.token(), command_api, home=home) as (
            page,
            problems,
        ),
        platform.client(platform.command_api) as admin,
    ):
        await expect(page.locator("article.device")).to_have_count(4, timeout=30_000)
        last = page.locator(f'article[data-device-id="{light_fleet[3]}"]')  # the page's admin controls
        await last.locator('.quarantine-form input[name="reason"]').fill("loose wiring")
        await last.get_by_role("button", name="Quarantine").click()
        await expect(last.locator(".quarantine")).to_contain_text(
            "Quarantined · loose wiring", timeout=30_000
        )
        await expect(last.locator("form.command-turn_on button")).to_be_disabled()
        await expect(last.locator("button.command-reboot")).to_be_enabled()  # admin commands stay on
        await last.get_by_role("button", name="Release").click()
        await expect(last.locator(".quarantine")).to_be_hidden(timeout=30_000)
        await expect(last.locator("form.command-turn_on button")).to_be_enabled()
        body = {
            "device_type": "light",
            "version": "2.0.0",
            "url": "https://firmware.example/light-2.0.0.bin",
            "sha256": SHA,
            "target": {"device_ids": light_fleet},
            "waves": [75, 100],  # the first three devices, then the fourth
            "soak_s": 0,
            "abort": {"max_failed_pct": 100, "max_offline_pct": 100, "max_anomaly_ratio": 1000},
            "job_timeout_s": 600,  # the offline third device's job stays in progress meanwhile
        }
        campaign_id = await start_recorded_campaign(admin, body)
        try:
            campaign = page.locator(f'li.campaign[data-campaign-id="{campaign_id}"]')
            first = campaign.locator('li.wave[data-wave="0"]')
            await expect(first).to_have_attribute("data-ok", "1", timeout=60_000)  # succeeded
            await expect(first).to_have_attribute("data-bad", "1", timeout=30_000)  # failed
            await expect(first).to_have_attribute("data-busy", "1")  # sent, held for the offline one
            await expect(first.locator(".seg.ok")).to_have_text("succeeded 1")
            await expect(first.locator(".seg.bad")).to_have_text("failed 1")
            await expect(first.locator(".seg.busy")).to_have_text("in progress 1")
            second = campaign.locator('li.wave[data-wave="1"]')
            await expect(second).to_have_attribute("data-idle", "1")  # queued
            await expect(second.locator(".seg.idle")).to_have_text("queued 1")
            await expect(campaign).to_have_attribute("data-status", "running")
            await expect(campaign.locator("header")).to_contain_text("light firmware 2.0.0")
            await screenshot(page, tmp_path / "live-page-campaign.png")

            stop = await admin.post(f"/v1/campaigns/{campaign_id}/abort", json={"reason": "test over"})
            assert stop.status_code == 202, stop.text
            await expect(campaign).to_have_attribute("data-status", "aborted", timeout=30_000)
            await expect(campaign.locator(".reason")).to_have_text("aborted: test over")
        finally:
            await admin.post(f"/v1/campaigns/{campaign_id}/abort", json={"reason": "test over"})
    assert problems == []
