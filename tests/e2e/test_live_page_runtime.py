"""The runtime report on the live page in Chromium (issue 22 point 4): a home's runtime per day as bars with
its degree-days as a line, in a panel for the home and under the thermostat's card. The records are the
ones ``hearth analytics runtime`` publishes (tests/integration/test_runtime_report.py runs the batch
itself), written here to the platform's rollups topic for the last five days; the platform's projector
and query API carry them to the page. A screenshot is saved in the test's directory."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
import pytest
from playwright.async_api import Browser, expect

from hearth_shared.schema.runtime_records import RuntimeDayRecord, runtime_key
from tests.support.live_browser import CHROMIUM, open_live_page, screenshot
from tests.support.platform import Platform
from tests.support.topics import produce

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is missing: run `make browser`"),
]

ZONE = ZoneInfo("Europe/Berlin")
HEATING = (310.0, 250.0, 0.0, 420.0, 380.0)  # minutes per day, oldest first (a mild day in the middle)
HDD = (9.5, 7.25, 0.2, 12.0, 11.0)


def records(home: str, device_id: str, today: date) -> list[tuple[bytes, bytes]]:
    """The batch's records for the five days up to ``today``, for the device and for its home."""
    found = []
    for back, (minutes, hdd) in enumerate(zip(reversed(HEATING), reversed(HDD), strict=True)):
        day = today - timedelta(days=back)
        start = datetime.combine(day, time(), ZONE)
        figures: dict[str, Any] = {
            "day": day.isoformat(), "time_zone": ZONE.key, "day_start": start.isoformat(),
            "day_end": datetime.combine(day + timedelta(days=1), time(), ZONE).isoformat(),
            "covered_min": 1440.0, "heating_min": minutes, "cooling_min": 0.0, "hdd": hdd,
            "heating_min_per_hdd": minutes / hdd if hdd >= 0.5 else None, "outdoor_mean_c": 18.0 - hdd,
            "manual_changes": back % 3, "holds": 0, "hold_min": 0.0, "away_min": 0.0,
        }  # fmt: skip
        device = RuntimeDayRecord(scope="device", home_id=home, device_id=device_id, devices=1, **figures)
        whole = RuntimeDayRecord(scope="home", home_id=home, device_id=None, devices=1, **figures)
        found += [
            (runtime_key("device", device_id, day.isoformat()).encode(), msgspec.json.encode(device)),
            (runtime_key("home", home, day.isoformat()).encode(), msgspec.json.encode(whole)),
        ]
    return found


async def test_the_runtime_report_is_drawn_for_the_home_and_its_thermostat(
    platform: Platform, browser: Browser, command_api: str, thermostat: tuple[str, str], tmp_path: Path
) -> None:
    home, device_id = thermostat
    # today (UTC) once: a run across midnight still looks for the day the records end on (the page shows
    # the 30 days up to its today, so the five stay on it)
    today = datetime.now(UTC).date()
    await produce(platform.settings.kafka_bootstrap_servers, platform.settings.topics.rollups,
                  records(home, device_id, today))  # fmt: skip
    async with platform.client(platform.query_api, home) as query:
        answer = (await query.get(f"/v1/homes/{home}/runtime")).json()  # the projector may lag: the page
    assert set(answer) == {"home_id", "from", "to", "items", "days"}  # polls again when a device appears

    async with open_live_page(browser, platform.query_api, platform.token(home), command_api) as (
        page,
        problems,
    ):
        panel = page.locator("#runtime")
        chart = panel.locator('figure.runtime[data-scope="home"]')
        await expect(chart).to_have_attribute("data-days", "5", timeout=30_000)
        await expect(chart.locator("rect.heating")).to_have_count(5)
        await expect(chart.locator("polyline.hdd")).to_have_attribute("data-points", "5")
        total_h = sum(HEATING) / 60
        await expect(chart.locator("figcaption")).to_contain_text(
            f"heating {total_h:.1f} h · {round(sum(HDD))} degree-days (base 18 °C)"
        )
        bars = chart.locator("rect.heating")
        await expect(bars.last).to_have_attribute("data-minutes", f"{HEATING[-1]:g}")
        await expect(bars.last).to_have_attribute("data-day", today.isoformat())

        card = page.locator(f'article[data-device-id="{device_id}"]')
        mine = card.locator('section.runtime figure.runtime[data-scope="device"]')
        await expect(mine).to_have_attribute("data-days", "5", timeout=30_000)
        await expect(mine.locator("rect.heating")).to_have_count(5)
        await screenshot(page, tmp_path / "live-page-runtime.png")
    assert problems == []
