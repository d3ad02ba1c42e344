"""Cards people read, in Chromium (issue 22 point 5): each card leads with what its type declares as
primary, labelled and with units (hearth_shared/domain/device_card.py, each type's module): a
thermostat's temperature and what it does now, its target with minus and plus (a plus sent from the
page converges on the device the test plays), and its mode; a lock's state with one button; a light's
switch and sliders. Its other keys follow, labelled. Its charts draw from the first reading, with no
rollup written yet, and a reading never reported says so. A screenshot of each card (one per type) and
of the page are saved in the test's directory."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from playwright.async_api import Browser, Locator, expect

from tests.support.live_browser import CHROMIUM, open_live_page, screenshot
from tests.support.platform import Platform

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is missing: run `make browser`"),
]


async def card_screenshot(card: Locator, path: Path) -> None:
    await card.screenshot(path=path)
    print(f"screenshot: {path}")


async def test_each_card_leads_with_what_its_type_declares(
    platform: Platform, browser: Browser, command_api: str, thermostat: tuple[str, str], tmp_path: Path
) -> None:
    home, thermostat_id = thermostat
    lock_id, light_id = f"lock-{uuid.uuid4().hex[:8]}", f"light-{uuid.uuid4().hex[:8]}"  # never heard from
    async with platform.client(command_api) as api:
        for device_id, kind, name in ((lock_id, "lock", "Front door"), (light_id, "light", "Hall light")):
            body = {"device_id": device_id, "home_id": home, "type": kind, "name": name}
            assert (await api.post("/v1/devices", json=body)).status_code == 201

    async with open_live_page(browser, platform.query_api, platform.token(home), command_api) as (
        page,
        problems,
    ):
        thermo = page.locator(f'article[data-device-id="{thermostat_id}"]')
        await expect(thermo.locator("header .type")).to_have_text("Thermostat")
        temperature = thermo.locator('.lead .reading[data-key="ambient_c"]')
        await expect(temperature.locator(".label")).to_have_text("Temperature")
        await expect(temperature.locator(".value")).to_have_text("19.5 °C", timeout=30_000)
        await expect(thermo.locator('.lead .reading[data-key="hvac_action"] .value')).to_have_text("Idle")
        target = thermo.locator('.lead .stepper[data-key="target_c"]')
        await expect(target.locator(".value")).to_have_text("19 °C")
        await expect(thermo.locator('.lead .choice[data-key="hvac_mode"] select')).to_have_value("heat")
        humidity = thermo.locator('table.state tr[data-key="humidity_pct"]')
        await expect(humidity.locator("th")).to_have_text("Humidity")
        await expect(humidity.locator("td.reported")).to_have_text("41 %")
        await expect(thermo.locator('table.state tr[data-key="ambient_c"]')).to_have_count(0)  # led with
        chart = thermo.locator('figure.trend[data-figure="ambient_c"]')  # no rollup yet: the readings
        await expect(chart.locator("svg polyline")).to_have_count(1, timeout=30_000)
        await expect(chart.locator("figcaption")).to_contain_text("Temperature · since ")
        await expect(chart.locator("figcaption")).to_contain_text(" · 19.5 °C")

        await target.get_by_role("button", name="Target up").click()
        command = thermo.locator(".command").first
        await expect(command.locator(".what")).to_have_text("Set target · 19.5 °C")
        await expect(command).to_have_attribute("data-status", "converged", timeout=30_000)
        await expect(target).to_have_attribute("data-reported", "19.5")
        await expect(target.locator(".value")).to_have_text("19.5 °C")
        await expect(thermo.locator('.lead .reading[data-key="hvac_action"] .value')).to_have_text("Heating")

        lock = page.locator(f'article[data-device-id="{lock_id}"]')
        await expect(lock.locator('.lead .reading[data-key="lock_state"] .value')).to_have_text("Locked")
        await expect(lock.locator('.lead .reading[data-key="door"] .value')).to_have_text("Closed")
        await expect(lock.locator(".lead").get_by_role("button")).to_have_text(["Unlock"])  # one button
        unlock = lock.locator(".lead").get_by_role("button", name="Unlock")
        await unlock.click()  # held while the lock is offline
        await expect(lock.locator(".command").first).to_have_attribute(
            "data-status", "accepted", timeout=30_000
        )
        await expect(lock.locator(".lead").get_by_role("button")).to_have_text(["Lock"])  # going to: unlocked
        going = lock.locator('.reading[data-key="lock_state"] .going')
        await expect(going).to_have_text("\u2192 Unlocked")  # an arrow: where the command takes it
        await expect(lock.locator('.reading[data-key="lock_state"]')).to_have_class("reading pending")
        battery = lock.locator('figure.trend[data-figure="battery_pct"]')
        await expect(battery).to_contain_text("Battery · 24 h")
        await expect(battery.locator(".no-readings")).to_have_text("no readings yet")

        light = page.locator(f'article[data-device-id="{light_id}"]')
        switch = light.get_by_role("switch")
        await expect(switch).to_have_attribute("aria-checked", "false")
        await expect(switch).to_have_text("Off")
        brightness = light.locator('.lead .slider[data-key="brightness_pct"]')
        await expect(brightness.locator(".label")).to_have_text("Brightness")
        await expect(brightness.locator("input")).to_have_attribute("max", "100")
        await expect(light.locator('.lead .slider[data-key="color_temp_k"] input')).to_have_attribute(
            "max", "6500"
        )
        await brightness.locator("input").evaluate(
            "(input) => { input.value = '60'; input.dispatchEvent(new Event('input')); "
            "input.dispatchEvent(new Event('change')); }"
        )  # a hand letting go of the slider at 60
        sent = light.locator(".command").first
        await expect(sent.locator(".what")).to_have_text("Turn on · 60 %")
        await expect(sent).to_have_attribute("data-status", "accepted", timeout=30_000)  # held: offline
        await expect(brightness.locator("output")).to_have_text("60 %")
        await expect(switch).to_have_attribute("aria-checked", "true")  # asked to be on
        await expect(switch).to_have_text("On")

        for card, kind in ((thermo, "thermostat"), (lock, "lock"), (light, "light")):
            await card_screenshot(card, tmp_path / f"card-{kind}.png")
        await screenshot(page, tmp_path / "live-page-cards.png")
    assert problems == []
