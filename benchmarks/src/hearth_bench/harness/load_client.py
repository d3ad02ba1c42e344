"""The client side of the stack benches: a lean HTTP/1.1 client (``LeanHttp``), open-loop pacing
(``paced``), percentiles, latency figures and rows, and each part's share of the CPU.

Lean because the benches measure the servers, not their client: an httpx client was itself the
bottleneck of the round trip at 200 commands/s on 2 cores (docs/BENCHMARKS.md, roundtrip).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit


@dataclass(frozen=True, slots=True)
class LeanResponse:
    status_code: int
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


# What a lean request can fail with: the connection (refused, reset, closed mid-answer) or the answer.
LEAN_ERRORS = (OSError, asyncio.IncompleteReadError, ValueError)


class LeanHttp:
    """A minimal HTTP/1.1 client for load: ``connections`` keep-alive connections, one request at a time
    on each; a request waits here for a free one (``timed`` says when it got it). Only what the benches
    send and uvicorn answers: a JSON body or none, answers with Content-Length.

    Why not httpx: at 200 requests/s, each held until a command converged, the round-trip bench's httpx
    client (8 pools of 32) was busy 93 % of the time (py-spy, 2026-11-22), so its queue, not the stack,
    set the latency. A connection idle for 4 s is opened again (uvicorn closes them after 5 s).
    """

    IDLE_S = 4.0

    def __init__(self, base_url: str, *, connections: int, headers: Mapping[str, str]) -> None:
        url = urlsplit(base_url)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self.head = f"Host: {self.host}:{self.port}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()
        )
        self.free: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter, float] | None]
        self.free = asyncio.Queue()
        for _ in range(connections):
            self.free.put_nowait(None)  # opened on first use
        self.open: set[asyncio.StreamWriter] = set()

    async def request(self, method: str, path: str, **options: Any) -> LeanResponse:
        return (await self.timed(method, path, **options))[1]

    async def timed(
        self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None
    ) -> tuple[float, LeanResponse]:
        """The request, and when (loop time) it got a connection."""
        loop = asyncio.get_running_loop()
        conn = await self.free.get()
        let_through = loop.time()
        if conn is not None and let_through - conn[2] > self.IDLE_S:
            self._close(conn[1])
            conn = None
        writer = None
        try:
            if conn is None:
                reader, writer = await asyncio.open_connection(self.host, self.port)
                self.open.add(writer)
            else:
                reader, writer, _ = conn
            body = b"" if json is None else _json_bytes(json)
            target = f"{path}?{urlencode(params)}" if params else path
            kind = "Content-Type: application/json\r\n" if json is not None else ""
            writer.write(
                f"{method} {target} HTTP/1.1\r\n{self.head}{kind}Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            response = LeanResponse(status, await reader.readexactly(length))
        except BaseException:
            if writer is not None:
                self._close(writer)  # its state is unknown: a fresh one next time
            self.free.put_nowait(None)
            raise
        self.free.put_nowait((reader, writer, loop.time()))
        return let_through, response

    def _close(self, writer: asyncio.StreamWriter) -> None:
        self.open.discard(writer)
        writer.close()

    async def __aenter__(self) -> LeanHttp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for writer in list(self.open):
            self._close(writer)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


async def paced(rate: float, duration_s: float, send: Callable[[int, float], Awaitable[None]]) -> float:
    """Start ``send(i, due)`` ``rate`` times a second for ``duration_s`` (open loop: a slow answer never
    delays the next start) and wait for all of them. ``due`` is when the send was meant to start (the
    loop's clock); measuring from it keeps a stalled client's delays in the figures. Returns how late
    the latest start was, in seconds."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    tasks: list[asyncio.Future[None]] = []
    late = 0.0
    for i in range(round(rate * duration_s)):
        due = start + i / rate
        if (wait := due - loop.time()) > 0:
            await asyncio.sleep(wait)
        late = max(late, loop.time() - due)
        tasks.append(asyncio.ensure_future(send(i, due)))  # a task for a coroutine
    await asyncio.gather(*tasks)
    return late


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (q in 0..100)."""
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def cpu_share(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """Each part's CPU use between two ``cpu_seconds`` samples, in % of one core, busiest first; ``others``
    is what the rest of the machine used (other people's work)."""
    share = {name: (after[name] - before.get(name, 0.0)) / seconds * 100 for name in after}
    ours = sum(v for name, v in share.items() if name != "machine")
    share["others"] = max(0.0, share["machine"] - ours)  # (CPU times are counted in ticks: ~1 % off)
    return {name: round(share[name]) for name in sorted(share, key=share.__getitem__, reverse=True)}


def latency_ms(seconds: Sequence[float]) -> dict[str, float]:
    """count, p50, p90, p99, max and mean of latencies given in seconds, in milliseconds."""
    ordered = sorted(seconds)
    if not ordered:
        return {"count": 0}
    figures = {f"p{q}": percentile(ordered, q) for q in (50, 90, 99)}
    figures |= {"max": ordered[-1], "mean": sum(ordered) / len(ordered)}
    return {"count": len(ordered)} | {k: round(v * 1000, 2) for k, v in figures.items()}


def latency_row(
    path: str, figures: dict[str, float], floor: dict[str, float] | None = None, *, ratios: bool = True
) -> dict[str, Any]:
    """A table row: the latency figures, and p50/p99 as ratios to the floor's (1.0 for the floor itself;
    none with ``ratios=False``, e.g. for the stages of a path)."""
    row: dict[str, Any] = {"path": path, "count": figures["count"]}
    row |= {f"{k} ms": figures.get(k, "") for k in ("p50", "p90", "p99", "max")}
    base = floor or figures
    if ratios and figures["count"]:
        row |= {f"{k} ratio": round(figures[k] / base[k], 2) for k in ("p50", "p99")}
    return row
