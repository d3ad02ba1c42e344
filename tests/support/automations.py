"""For the automation tests on the real stack: a real HTTP server that receives webhooks, checking a
webhook's signature, and reading an automation's state and runs from the query API."""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


class Receiver:
    """A real HTTP server on a free loopback port that records every request it gets."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A ``Receiver`` serving until the block ends."""
    r = Receiver()
    r.thread.start()
    try:
        yield r
    finally:
        r.server.shutdown()
        r.server.server_close()


def signed_by(secret: str, headers: dict[str, str], body: bytes) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers.get("x-hearth-signature", ""), expected)


async def automation_listed(query: httpx.AsyncClient, automation_id: str) -> bool:
    response = await query.get("/v1/automations")
    return response.status_code == 200 and any(
        a["automation_id"] == automation_id for a in response.json()["automations"]
    )


async def runs(query: httpx.AsyncClient, automation_id: str) -> dict[str, Any]:
    """``GET /v1/automations/{id}/runs``: its runs (newest first, each command with its status)."""
    response = await query.get(f"/v1/automations/{automation_id}/runs")
    assert response.status_code == 200, response.text
    return dict(response.json())
