"""The live page in Debian's Chromium (``make browser``), driven by Playwright: ``open_live_page`` starts a
headless browser on the page (opened with ``token`` and the command API it may call), waits until its
websocket is live and yields the page and the list of errors its console and scripts reported (a test
asserts that list is empty at its end); ``screenshot`` saves one in the test's directory and prints
where."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlencode

from playwright.async_api import ConsoleMessage, Page, async_playwright, expect

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@asynccontextmanager
async def open_live_page(
    query_api: str, token: str, command_api: str, *, home: str | None = None, width: int = 1200
) -> AsyncIterator[tuple[Page, list[str]]]:
    problems: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            problems.append(message.text)

    query = {"token": token, "api": command_api, **({"home": home} if home else {})}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": width, "height": 800})
            page.on("console", console)
            page.on("pageerror", lambda error: problems.append(str(error)))
            await page.goto(f"{query_api}/?{urlencode(query)}")
            await expect(page.locator("#conn")).to_have_text("live", timeout=30_000)
            yield page, problems
        finally:
            await browser.close()


async def screenshot(page: Page, path: Path) -> None:
    await page.screenshot(path=path, full_page=True)
    print(f"screenshot: {path}")
