"""The live page draws each device from its type's schema (GET /v1/device-types), in Chromium: a light's
forms come from its params schema, labelled with units (no type names in the page), a thermostat's
chart joins the rollups the streaming job wrote over the last 24 hours to the readings since, and each
command shows its progress through the statuses. A screenshot is saved in the test's directory."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.async_api import Browser, ConsoleMessage, expect

from hearth_shared.adapters.kafka import make_producer
from tests.support.live_browser import CHROMIUM, new_page, open_more_controls
from tests.support.platform import Platform
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e


def rollup(device_id: str, home: str, start: datetime, mean: float) -> tuple[bytes, bytes]:
    """A 15-minute device rollup record as the streaming job writes it (key, value)."""
    iso = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    value = {
        "schema_version": 1, "scope": "device", "home_id": home, "device_id": device_id, "window": "15m",
        "window_start": iso, "window_end": (start + timedelta(minutes=15)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "readings": 30,
        "metrics": {"ambient_c": {"count": 30, "mean": mean, "min": mean - 0.3, "max": mean + 0.3}},
        "heating_minutes": 4.0, "late_events": 0, "late_expired": 0,
    }  # fmt: skip
    return f"device:{device_id}:15m:{iso}".encode(), json.dumps(value).encode()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is missing: run `make browser`")
async def test_the_page_draws_devices_from_their_types(
    platform: Platform,
    browser: Browser,
    command_api: str,
    thermostat: tuple[str, str],
    tmp_path: Path,
) -> None:
    home, thermostat_id = thermostat
    light_id = f"light-{uuid.uuid4().hex[:8]}"  # registered, never heard from: offline, commands held
    async with platform.client(command_api) as api:
        body = {"device_id": light_id, "home_id": home, "type": "light", "name": "Hall light"}
        assert (await api.post("/v1/devices", json=body)).status_code == 201
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    starts = [now - timedelta(hours=h, minutes=now.minute % 15) for h in (20, 6, 1)]
    producer = make_producer(platform.settings.kafka_bootstrap_servers, "test-live-page-types")
    await producer.start()
    try:
        for start, mean in zip(starts, (19.0, 21.5, 20.2), strict=True):
            key, value = rollup(thermostat_id, home, start, mean)
            await producer.send_and_wait(platform.settings.topics.rollups, value, key=key)
    finally:
        await producer.stop()
    async with platform.client(platform.query_api, home) as query:

        async def projected() -> bool:
            response = await query.get(f"/v1/devices/{thermostat_id}/rollups", params={"window": "15m"})
            return response.status_code == 200 and len(response.json()["items"]) == 3

        await eventually(projected, "the rollups in the views", timeout_s=60)

    problems: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            problems.append(message.text)

    query_string = urlencode({"token": platform.token(home), "api": command_api})
    async with new_page(browser, width=1100, height=760) as page:
        page.on("console", console)
        page.on("pageerror", lambda error: problems.append(str(error)))
        await page.goto(f"{platform.query_api}/?{query_string}")
        await expect(page.locator("#conn")).to_have_text("live", timeout=15_000)

        thermo = page.locator(f'article[data-device-id="{thermostat_id}"]')
        trend = thermo.locator('figure.trend[data-figure="ambient_c"]')
        # the three windows, then the device's first reading (its later reports left ambient_c as it
        # was) and its value now; read again within a minute if the page came before that reading
        await expect(trend).to_have_attribute("data-points", "5", timeout=70_000)
        await expect(trend.locator("figcaption")).to_contain_text("19.5 °C (19 °C to 21.5 °C)")

        light = page.locator(f'article[data-device-id="{light_id}"]')
        await open_more_controls(light)
        await expect(light.locator("details.more").get_by_role("button")).to_have_text(
            ["Turn on", "Turn off"]
        )
        await expect(light.locator("form.command-turn_on label").first).to_have_text("Brightness %")
        level = light.locator('form.command-turn_on input[name="brightness_pct"]')
        await expect(level).to_have_attribute("min", "1")
        await expect(level).to_have_attribute("max", "100")
        await expect(light.locator('form.command-turn_on input[name="color_temp_k"]')).to_have_attribute(
            "max", "6500"
        )
        await level.fill("60")
        await light.get_by_role("button", name="Turn on").click()  # held: the light is offline
        held = light.locator(".command").first
        await expect(held).to_have_attribute("data-status", "accepted", timeout=30_000)
        await expect(held.locator(".step.done")).to_have_count(2)  # pending, accepted
        await expect(light.locator('.slider[data-key="brightness_pct"] output')).to_have_text("60 %")
        await expect(light.get_by_role("switch")).to_have_text("On")

        await open_more_controls(thermo)
        await thermo.locator('input[name="target_c"]').fill("21.5")
        await thermo.get_by_role("button", name="Set target").click()
        done = thermo.locator(".command").first
        await expect(done).to_have_attribute("data-status", "converged", timeout=30_000)
        await expect(done.locator(".step.done")).to_have_count(5)

        await page.screenshot(path=tmp_path / "live-page-types.png", full_page=True)
        print(f"screenshot: {tmp_path / 'live-page-types.png'}")
    assert problems == []
