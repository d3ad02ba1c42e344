"""``GatedClient``: an httpx client whose calls never wait in httpx's own connection pool.

Why: httpx 0.28's pool (httpcore 1.0.9, the newest release) loses a connection slot when a call's wait
for a connection ends (its pool timeout, or a cancellation) in the same turn of the event loop as the
pool hands it a newly made connection. That connection stays ``CONNECTING`` for good: it is neither
closed, nor idle, nor available, so nothing reclaims it. Once ``max_connections`` slots are lost every
call fails with ``PoolTimeout`` against a healthy server, until the client is made again
(encode/httpcore#1093, open). Calls queue in the pool whenever the server answers slower than they come,
and time out together when it answers slower than their timeout: a webhook receiver that is down or
slow, or the command API restarting under a steady client. That is what stopped the scale-out drill of
2026-11-28 (no call got a 202 for 120 s from a command API that was up; docs/BENCHMARKS.md, drill), and
tests/integration/test_http_calls.py shows it with a plain client.

How: a call first takes one of ``max_connections`` places in an ``asyncio.Semaphore``, whose waits may
end any time and lose nothing, and only then goes to the pool, which then always has a connection for
it. ``send`` is where every call of the client (``get``, ``post``, ...) passes; a response read whole
(the default) has given its connection back by the time ``send`` returns. A streamed response keeps it
longer, so the client refuses ``stream=True``. What the gate cannot stop: a call cancelled from outside
(``task.cancel()``) in the one loop turn between the pool's handing it a connection and its using it
still loses that slot; Hearth cancels calls that way only when a process stops.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

DEFAULT_MAX_CONNECTIONS = 100  # httpx's own default


class GatedClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` with at most ``max_connections`` calls in its pool at a time; calls beyond
    that wait their turn before the pool (see the module). Every other argument is httpx's."""

    def __init__(self, *, max_connections: int = DEFAULT_MAX_CONNECTIONS, **kwargs: Any) -> None:
        if "limits" in kwargs:
            raise TypeError("GatedClient sets its pool's limits itself: pass max_connections")
        super().__init__(limits=httpx.Limits(max_connections=max_connections), **kwargs)
        self._places = asyncio.Semaphore(max_connections)

    async def send(self, request: httpx.Request, *, stream: bool = False, **kwargs: Any) -> httpx.Response:
        if stream:
            raise ValueError("GatedClient reads every response whole: a streamed one holds its connection")
        async with self._places:
            return await super().send(request, stream=False, **kwargs)
