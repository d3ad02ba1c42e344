"""Waiting on a running stack: the one wait loop the tests, the chaos drills and the benchmarks share.

``eventually`` polls a condition until it holds or a deadline passes, and fails with a message that says
what was awaited. ``poll_until`` (a value fetched until it is ready) is that same loop with what it
fetches. Nothing that drives a stack writes its own ``while ...: sleep``: the views are eventually
consistent, and every wait has a deadline and says what it waited for.

A wait that runs out raises ``NotInTime``, an ``AssertionError``: in a test it is the failure; a
benchmark catches it where a part not coming back in time is an outcome to report, not a crash.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

# A function or a coroutine function; the wait ends when its result is truthy. (``object`` alone would do;
# the other members let mypy infer lambdas with default arguments, ``lambda n=n: ...``, against it.)
Check = Callable[[], bool] | Callable[[], Awaitable[object]] | Callable[[], object]
T = TypeVar("T")


# A wait polls every ``every_s`` at first; once it has waited long enough, a tenth of the time it has
# waited, at most ``SLOWEST_S``: a condition that takes seconds (a stack's parts settling, a simulated
# device's next report) is checked a few times a second instead of twenty, each check a request to a
# service or a read of a topic on the same busy cores, and is seen at most a tenth (or SLOWEST_S) late.
LATE_SHARE = 0.1
SLOWEST_S = 0.25


def pause_s(every_s: float, waited_s: float) -> float:
    """How long a wait that has waited ``waited_s`` sleeps before its next check."""
    if every_s <= 0 or every_s >= SLOWEST_S:
        return every_s
    return min(SLOWEST_S, max(every_s, waited_s * LATE_SHARE))


class NotInTime(AssertionError):
    """What was awaited did not come within the wait's deadline."""


async def eventually(
    check: Check,
    what: str,
    *,
    timeout_s: float = 60.0,
    every_s: float = 0.05,
    shown: Callable[[], object] | None = None,
) -> float:
    """Wait until ``check()`` (a function or a coroutine function) is truthy; raise ``NotInTime`` saying
    ``what`` (and what ``shown()`` returns then, if given) if it is not within ``timeout_s``. An exception
    from ``check`` ends the wait at once (an assertion there says the awaited thing can no longer
    happen). Returns the seconds it took."""
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
            raise NotInTime(f"timed out after {timeout_s:g} s waiting for {what}{last}")
        await asyncio.sleep(pause_s(every_s, loop.time() - started))


async def steadily(
    check: Check, what: str, *, for_s: float, timeout_s: float = 60.0, every_s: float = 0.5
) -> float:
    """Wait until ``check()`` has held at every check for ``for_s`` on end (a backlog drained and staying
    so, a machine gone quiet); raise ``NotInTime`` as ``eventually`` does. Returns the seconds it took."""
    loop = asyncio.get_running_loop()
    since: float | None = None

    async def held_long_enough() -> bool:
        nonlocal since
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if not result:
            since = None
            return False
        since = loop.time() if since is None else since
        return loop.time() - since >= for_s

    return await eventually(held_long_enough, f"{what} for {for_s:g} s", timeout_s=timeout_s, every_s=every_s)


async def poll_until(
    fetch: Callable[[], Awaitable[T]],
    ready: Callable[[T], bool],
    what: str,
    *,
    timeout_s: float = 60.0,
    every_s: float = 0.1,
) -> T:
    """``await fetch()`` until ``ready`` holds for what it returns, and return that; raise ``NotInTime``
    saying ``what`` and showing the last value if it does not within ``timeout_s``."""
    last: list[T] = []

    async def fetched_ready() -> bool:
        last[:] = [await fetch()]
        return ready(last[0])

    def last_shown() -> object:
        return getattr(last[0], "text", last[0]) if last else "(nothing fetched)"  # a response: its body

    await eventually(fetched_ready, what, timeout_s=timeout_s, every_s=every_s, shown=last_shown)
    return last[0]
