"""The live page in Debian's Chromium (``make browser``), driven by Playwright.

``chromium`` runs the headless browser: the ``browser`` fixture (tests/conftest.py) holds one for the
whole test session, since starting Chromium costs seconds of CPU that every browser test would pay again
(its tests share one xdist worker, tests/support/distribution.py). A test gets its own pages from
``new_page``: a browser context of its own (cookies, session storage), closed at the end, so no test sees
another's page token. ``open_live_page`` opens the live page in one (with ``token`` and the command API
it may call), waits until its websocket is live and yields the page and the list of errors its console
and scripts reported (a test asserts that list is empty at its end); ``screenshot`` saves one in the
test's directory and prints where; ``open_more_controls`` unfolds a card's forms of every command (the
card leads with its type's primary controls, the forms are folded under them)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlencode

from playwright.async_api import Browser, ConsoleMessage, Locator, Page, async_playwright, expect

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
async def chromium() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless, until the block ends."""
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


@asynccontextmanager
async def new_page(browser: Browser, *, width: int = 1200, height: int = 800) -> AsyncIterator[Page]:
    """A page in a browser context of its own, closed (with everything it stored) when the block ends."""
    context = await browser.new_context(viewport={"width": width, "height": height})
    try:
        yield await context.new_page()
    finally:
        await context.close()


@asynccontextmanager
async def open_live_page(
    browser: Browser,
    query_api: str,
    token: str,
    command_api: str,
    *,
    home: str | None = None,
    width: int = 1200,
) -> AsyncIterator[tuple[Page, list[str]]]:
    problems: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            problems.append(message.text)

    query = {"token": token, "api": command_api, **({"home": home} if home else {})}
    async with new_page(browser, width=width) as page:
        page.on("console", console)
        page.on("pageerror", lambda error: problems.append(str(error)))
        await page.goto(f"{query_api}/?{urlencode(query)}")
        await expect(page.locator("#conn")).to_have_text("live", timeout=30_000)
        yield page, problems


async def screenshot(page: Page, path: Path) -> None:
    await page.screenshot(path=path, full_page=True)
    print(f"screenshot: {path}")


async def open_more_controls(card: Locator) -> None:
    """Unfold a device card's "More controls" (every command of its type as a form), if it is not yet."""
    await card.locator("details.more").evaluate("(details) => { details.open = true; }")
