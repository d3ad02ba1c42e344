"""Waiting in tests: the stack's one wait loop (``eventually``, ``poll_until``: hearth_devstack.waiting,
shared with the chaos drills and the benchmarks), and ``twin_when``, built on it: a device's twin read
through the query API until it satisfies a predicate. A test never writes its own ``while ...: sleep``:
the views are eventually consistent, and every wait has a deadline and says what it waited for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from hearth_devstack.waiting import NotInTime, eventually, poll_until

__all__ = ["NotInTime", "eventually", "poll_until", "twin_when"]


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
