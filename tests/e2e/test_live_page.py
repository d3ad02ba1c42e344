"""The live page in a real browser: Debian's Chromium (``make browser``) driven by Playwright, against the
platform's query API (which serves the page) and a command API that lets that page call it (CORS). The
test plays the thermostat over the broker, so the command the page sends converges. A rebuild swapped in
while the page is open replaces its device list, and live changes keep coming."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import psycopg
import pytest
from playwright.async_api import Browser, ConsoleMessage, Locator, Page, expect
from redis.asyncio import Redis

from hearth_read_models.rebuild.run import rebuild
from hearth_read_models.settings import ReadModelSettings
from hearth_read_models.store.db import libpq_dsn
from hearth_shared.schema.auth import create_token
from tests.support.live_browser import CHROMIUM, new_page, open_more_controls
from tests.support.live_feed import query_api_process
from tests.support.platform import SECRET, Platform
from tests.support.waiting import twin_when

pytestmark = pytest.mark.e2e


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is missing: run `make browser`")
async def test_the_page_sets_a_target_and_shows_it_converge(
    platform: Platform, browser: Browser, command_api: str, thermostat: tuple[str, str], tmp_path: Path
) -> None:
    home, device_id = thermostat
    lock_id = f"lock-{uuid.uuid4().hex[:8]}"  # registered, never heard from: offline, with its controls
    async with platform.client(command_api) as api:
        body = {"device_id": lock_id, "home_id": home, "type": "lock", "name": "Front door"}
        assert (await api.post("/v1/devices", json=body)).status_code == 201
    query = urlencode({"token": platform.token(home), "api": command_api})
    problems: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            problems.append(message.text)  # (a 404 from GET /v1/alerts is one, while it does not exist)

    async with new_page(browser, width=1000, height=640) as page:
        page.on("console", console)
        page.on("pageerror", lambda error: problems.append(str(error)))
        await page.goto(f"{platform.query_api}/?{query}")

        card = page.locator(f'article[data-device-id="{device_id}"]')
        target = card.locator('.lead .stepper[data-key="target_c"]')
        await expect(page.locator("#conn")).to_have_text("live", timeout=15_000)
        assert "token" not in page.url  # taken out of the address bar, traded for a page token
        await expect(card.locator(".badge")).to_have_text("online", timeout=30_000)
        await expect(target).to_have_attribute("data-reported", "19", timeout=30_000)

        await open_more_controls(card)
        await card.locator('input[name="target_c"]').fill("22.5")
        await card.get_by_role("button", name="Set target").click()
        command = card.locator(".command").first
        await expect(command).to_have_attribute("data-status", "converged", timeout=30_000)
        await expect(target).to_have_attribute("data-reported", "22.5")
        await expect(target.locator(".value")).to_have_text("22.5 °C")
        await expect(target).not_to_have_class("control stepper pending")
        await expect(card.locator('.reading[data-key="hvac_action"] .value')).to_have_text("Heating")
        lock = page.locator(f'article[data-device-id="{lock_id}"]')
        await expect(lock.locator(".badge")).to_have_text("offline")
        await expect(lock.locator(".lead").get_by_role("button")).to_have_text(["Unlock"])
        unlock = lock.locator(".lead").get_by_role("button", name="Unlock")
        await unlock.click()  # held while the lock is offline
        await expect(lock.locator(".command").first).to_have_attribute("data-status", "accepted")
        await expect(lock.locator(".lead").get_by_role("button")).to_have_text(["Lock"])
        going = lock.locator('.reading[data-key="lock_state"] .going')
        await expect(going).to_have_text("\u2192 Unlocked")  # an arrow: where the command takes it

        await page.screenshot(path=tmp_path / "live-page.png", full_page=True)
        print(f"screenshot: {tmp_path / 'live-page.png'}")
    assert problems == []


async def _set_target(page: Page, device_id: str, target_c: str) -> None:
    """Set the thermostat's target on the page and wait until the device reports it."""
    card = page.locator(f'article[data-device-id="{device_id}"]')
    await open_more_controls(card)
    await card.locator('input[name="target_c"]').fill(target_c)
    await card.get_by_role("button", name="Set target").click()
    await expect(card.locator(".command").first).to_have_attribute("data-status", "converged", timeout=30_000)
    await expect(card.locator('.stepper[data-key="target_c"]')).to_have_attribute("data-reported", target_c)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is missing: run `make browser`")
async def test_a_rebuild_swapped_in_replaces_the_pages_devices_and_changes_keep_coming(
    platform: Platform, browser: Browser, command_api: str, thermostat: tuple[str, str]
) -> None:
    """Views gone wrong (a twin renamed, a twin that no fact made) are on the page; ``hearth rebuild``
    replays the journal and swaps in views without them; the page, told by the swap's snapshot, drops
    the twin that is gone and shows the rebuilt one, and still follows the live changes."""
    home, device_id = thermostat
    lock_id, ghost_id = f"lock-{uuid.uuid4().hex[:8]}", f"ghost-{uuid.uuid4().hex[:8]}"
    async with platform.client(command_api) as api:
        body = {"device_id": lock_id, "home_id": home, "type": "lock", "name": "Front door"}
        assert (await api.post("/v1/devices", json=body)).status_code == 201
    async with platform.client(platform.query_api, home) as query_api:
        await twin_when(query_api, lock_id, lambda twin: True)
    settings = ReadModelSettings(stack=platform.settings)  # the platform's live views
    twins = f"{settings.schema_name}.twins"
    with psycopg.connect(libpq_dsn(platform.settings.postgres_dsn)) as conn:  # (commits on leaving)
        [(evil,)] = conn.execute(
            f"UPDATE {twins} SET name = 'Evil', view = jsonb_set(view, '{{name}}', '\"Evil\"')"
            " WHERE device_id = %s RETURNING view",
            (lock_id,),
        ).fetchall()
        conn.execute(
            f"INSERT INTO {twins} SELECT %(ghost)s::text, home_id, device_type, 'Ghost', version, online,"
            " view || jsonb_build_object('device_id', %(ghost)s::text, 'name', 'Ghost'), state, updated_at"
            f" FROM {twins} WHERE device_id = %(lock)s",
            {"ghost": ghost_id, "lock": lock_id},
        )
    async with Redis.from_url(platform.settings.redis_url) as redis:
        await redis.set(f"twin:{lock_id}", json.dumps(evil))
    query = urlencode({"token": platform.token(home), "api": command_api})
    problems: list[str] = []

    async with new_page(browser, width=1000, height=640) as page:
        page.on("pageerror", lambda error: problems.append(str(error)))
        await page.goto(f"{platform.query_api}/?{query}")

        def card(device: str) -> Locator:
            return page.locator(f'article[data-device-id="{device}"]')

        await expect(page.locator("#conn")).to_have_text("live", timeout=15_000)
        await expect(card(ghost_id).locator("h2")).to_have_text("Ghost", timeout=30_000)
        await expect(card(lock_id).locator("h2")).to_have_text("Evil")
        await _set_target(page, device_id, "21.5")  # live changes before the swap

        result = await rebuild(settings)
        assert result.swapped and result.twins_refreshed >= 2  # the lock's view; the ghost's deleted

        await expect(card(lock_id).locator("h2")).to_have_text("Front door", timeout=15_000)
        await expect(card(ghost_id)).to_have_count(0, timeout=15_000)
        await expect(page.locator("article.device")).to_have_count(2)
        await expect(page.locator("#conn")).to_have_text("live")
        await _set_target(page, device_id, "23")  # and after it, on the same connection
    assert problems == []


@pytest.fixture
def short_lived_pages(platform: Platform, tmp_path: Path) -> Iterator[str]:
    """A query API beside the platform's whose page tokens live 6 s (the page renews them after 4 s)."""
    with query_api_process(platform, tmp_path, {"HEARTH_READ_MODELS_PAGE_TOKEN_LIFETIME_S": "6"}) as url:
        yield url


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is missing: run `make browser`")
async def test_the_page_trades_its_link_once_and_renews_its_token_while_open(
    platform: Platform,
    browser: Browser,
    command_api: str,
    thermostat: tuple[str, str],
    short_lived_pages: str,
) -> None:
    """Opened with a single-use link token, the page takes it out of the address bar, and keeps its
    websocket live past several page-token lifetimes (renewing, then moving the websocket to the new
    token); the same link opened again is refused."""
    home, device_id = thermostat
    link = create_token(SECRET, home_id=home, kind="link")
    problems: list[str] = []
    async with new_page(browser, width=1000, height=640) as page:
        page.on("pageerror", lambda error: problems.append(str(error)))
        await page.goto(f"{short_lived_pages}/?{urlencode({'token': link, 'api': command_api})}")
        await expect(page.locator("#conn")).to_have_text("live", timeout=15_000)
        assert "token" not in page.url
        first = await page.evaluate("sessionStorage.getItem('hearth.pageToken')")
        await asyncio.sleep(14)  # past two lifetimes of a page token: renewed twice, still live
        await expect(page.locator("#conn")).to_have_text("live")
        assert await page.evaluate("sessionStorage.getItem('hearth.pageToken')") != first
        async with platform.client(command_api, home) as api:
            command = {"name": "set_target_temperature", "params": {"target_c": 24.5}}
            assert (await api.post(f"/v1/devices/{device_id}/commands", json=command)).status_code == 202
        card = page.locator(f'article[data-device-id="{device_id}"]')
        await expect(card.locator('.stepper[data-key="target_c"]')).to_have_attribute(
            "data-reported", "24.5", timeout=30_000
        )

    async with new_page(browser) as again:  # another tab (no session of its own) with the used link
        await again.goto(f"{short_lived_pages}/?token={link}")
        await expect(again.locator("#notice")).to_contain_text("already used", timeout=15_000)
    assert problems == []
