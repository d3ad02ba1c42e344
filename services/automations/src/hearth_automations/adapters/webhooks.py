"""Notifications as webhooks: each one POSTed as JSON to the home's ``webhook_url`` with
``X-Hearth-Signature: sha256=<hex HMAC-SHA256 of the exact body, keyed by the home's secret>`` and
``X-Hearth-Notification-Id`` (its dedupe key: one alert, one notification id, however often it is sent).

Retries are tenacity's (exponential backoff with jitter, bounded attempts) over httpx: a transport
error, a 408, 429 or 5xx is retried; any other 4xx is the receiver saying no, and is not. The outcome is
a fact either way: ``notification.delivered`` or ``notification.gave_up`` (with the attempts and the
last status or error). A notification whose fact is already in the home journal is not sent again.

The client is a ``GatedClient`` (hearth_shared.adapters.http_calls): at most 100 webhooks are in flight,
and more wait their turn. A plain httpx client can lose its pool for good to a receiver that is down or
slower than the timeout while notifications queue, after which every home's webhook would give up.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import Any

import httpx
import msgspec
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from hearth_automations.service.notifier import Outcome

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Hearth-Signature"
ID_HEADER = "X-Hearth-Notification-Id"


def signature(secret: str, body: bytes) -> str:
    """The header value for ``body``: ``sha256=<hex>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Retryable(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class WebhookSender:
    """The notifier's ``NotificationSender`` over httpx."""

    def __init__(
        self, client: httpx.AsyncClient, *, attempts: int, backoff_s: float, max_backoff_s: float
    ) -> None:
        self.client = client
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s

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
                wait=wait_exponential_jitter(initial=self.backoff_s, max=self.max_backoff_s),
                retry=retry_if_exception_type((httpx.TransportError, Retryable)),
                reraise=True,
            ):
                with attempt:
                    tried += 1
                    response = await self.client.post(url, content=body, headers=headers)
                    last_status = response.status_code
                    if response.status_code in (408, 429) or response.status_code >= 500:
                        raise Retryable(response.status_code)
        except (httpx.HTTPError, Retryable) as exc:
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
