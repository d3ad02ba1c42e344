"""Notifications as webhooks: each one POSTed as JSON to the home's ``webhook_url`` with
``X-Hearth-Signature: sha256=<hex HMAC-SHA256 of the exact body, keyed by the home's secret>`` and
``X-Hearth-Notification-Id`` (its dedupe key: one alert, one notification id, however often it is sent).

Retries are tenacity's (exponential backoff with jitter, bounded attempts) over httpx: a transport
error, a 408, 429 or 5xx is retried; any other 4xx is the receiver saying no, and is not. The outcome is
a fact either way: ``notification.delivered`` or ``notification.gave_up`` (with the attempts and the
last status or error). A notification whose fact is already in the home journal is not sent again.

Receivers are kept apart: at most ``PER_RECEIVER`` webhooks are in flight to one receiver (its scheme,
host and port) at a time, and more to it wait their turn, so a receiver that is down or slower than the
timeout holds a few places, not the client's all, and other homes' webhooks go out meanwhile. The client
is a ``GatedClient`` (hearth_shared.adapters.http_calls): at most 100 in flight in all. A plain httpx
client can lose its pool for good to such a receiver while notifications queue, after which every
home's webhook would give up. A wait for a turn is not an attempt: the timeout counts from the post.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from hearth_automations.service.notifier import Outcome

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Hearth-Signature"
ID_HEADER = "X-Hearth-Notification-Id"
PER_RECEIVER = 4  # webhooks in flight to one receiver at a time


def signature(secret: str, body: bytes) -> str:
    """The header value for ``body``: ``sha256=<hex>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Retryable(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class Turns:
    """At most ``each`` holders of a turn per key at a time; a key's entry lives while one waits or holds."""

    def __init__(self, each: int) -> None:
        self.each = each
        self.gates: dict[str, tuple[asyncio.Semaphore, int]] = {}  # key -> (its gate, holders and waiters)

    @contextlib.asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        gate, users = self.gates.get(key) or (asyncio.Semaphore(self.each), 0)
        self.gates[key] = (gate, users + 1)
        try:
            async with gate:
                yield
        finally:
            gate, users = self.gates[key]
            if users == 1:
                del self.gates[key]
            else:
                self.gates[key] = (gate, users - 1)


def receiver(url: str) -> str:
    """The receiver a webhook URL names: its scheme, host and port (what one connection reaches)."""
    parsed = httpx.URL(url)
    return f"{parsed.scheme}://{parsed.host}:{parsed.port or ''}"


class WebhookSender:
    """The notifier's ``NotificationSender`` over httpx."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        attempts: int,
        backoff_s: float,
        max_backoff_s: float,
        per_receiver: int = PER_RECEIVER,
    ) -> None:
        self.client = client
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.receivers = Turns(per_receiver)

    async def send(self, url: str, secret: str, notification_id: str, content: dict[str, Any]) -> Outcome:
        body = msgspec.json.encode(content)
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(secret, body),
            ID_HEADER: notification_id,
        }
        tried = 0
        last_status: int | None = None
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self.attempts),
                wait=wait_exponential_jitter(multiplier=self.backoff_s, max=self.max_backoff_s),
                retry=retry_if_exception_type((httpx.TransportError, Retryable)),
                reraise=True,
            ):
                with attempt:
                    tried += 1
                    async with self.receivers.turn(receiver(url)):
                        response = await self.client.post(url, content=body, headers=headers)
                    last_status = response.status_code
                    if response.status_code in (408, 429) or response.status_code >= 500:
                        raise Retryable(response.status_code)
        except (httpx.HTTPError, httpx.InvalidURL, Retryable) as exc:  # (InvalidURL: a URL no post can use)
            log.warning(
                "notification %s to %s gave up after %d attempts: %s", notification_id, url, tried, exc
            )
            return Outcome(
                delivered=False, attempts=tried, status=last_status, error=str(exc) or type(exc).__name__
            )
        delivered = last_status is not None and 200 <= last_status < 300
        return Outcome(
            delivered=delivered, attempts=tried, status=last_status, error="" if delivered else "refused"
        )
