"""Waiting in tests: the suite's one wait loop, and what is built on it.

``eventually`` polls a condition until it holds or a deadline passes, and fails with a message that says
what was awaited. ``poll_until`` (a value fetched until it is ready) and ``twin_when`` (a device's twin
read through the query API until it satisfies a predicate) are that same loop with what they fetch, so a
test never writes its own ``while ...: sleep``: the views are eventually consistent, and every wait has a
deadline and says what it waited for.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx

# A function or a coroutine function; the wait ends when its result is truthy. (``object`` alone would do;
# the other members let mypy infer lambdas with default arguments, ``lambda n=n: ...``, against it.)
Check = Callable[[], bool] | Callable[[], Awaitable[object]] | Callable[[], object]
T = TypeVar("T")


async def eventually(
    check: Check,
    what: str,
    *,
    timeout_s: float = 60.0,
    every_s: float = 0.05,
    shown: Callable[[], object] | None = None,
) -> float:
    """Wait until ``check()`` (a function or a coroutine function) is truthy; fail saying ``what`` (and
    what ``shown()`` returns then, if given) if it is not within ``timeout_s``. An exception from
    ``check`` ends the wait at once (an assertion there says the awaited thing can no longer happen).
    Returns the seconds it took."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return loop.time() - started
        if loop.time() >= started + timeout_s:
            last = f"; last: {shown()!r:.2000}" if shown is not None else ""
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}{last}")
        await asyncio.sleep(every_s)


async def poll_until(
    fetch: Callable[[], Awaitable[T]],
    ready: Callable[[T], bool],
    what: str,
    *,
    timeout_s: float = 60.0,
    every_s: float = 0.1,
) -> T:
    """``await fetch()`` until ``ready`` holds for what it returns, and return that; fail saying ``what``
    and showing the last value if it does not within ``timeout_s``."""
    last: list[T] = []

    async def fetched_ready() -> bool:
        last[:] = [await fetch()]
        return ready(last[0])

    def last_shown() -> object:
        return getattr(last[0], "text", last[0]) if last else "(nothing fetched)"  # a response: its body

    await eventually(fetched_ready, what, timeout_s=timeout_s, every_s=every_s, shown=last_shown)
    return last[0]


async def twin_when(
    query: httpx.AsyncClient,
    device_id: str,
    ready: Callable[[dict[str, Any]], bool],
    timeout_s: float = 30,
) -> dict[str, Any]:
    """The device's twin from the query API (``query``: a client with a token that may read it) once
    ``ready(twin)`` holds (the view is eventually consistent)."""
    response = await poll_until(
        lambda: query.get(f"/v1/devices/{device_id}"),
        lambda r: r.status_code == 200 and ready(r.json()),
        f"the twin of {device_id}",
        timeout_s=timeout_s,
    )
    return dict(response.json())
