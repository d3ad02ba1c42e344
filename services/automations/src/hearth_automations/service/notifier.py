"""Sends notifications in the background and records each outcome as a fact on the home journal
(``notification.delivered`` / ``notification.gave_up``, fact id = the notification's dedupe key).

One alert, one notification: a notification id already delivered or given up (in the home journal), or
on its way, is not sent again: only one the home view still holds as ``unsent`` (its run fact folded,
no outcome yet) is sent. A home with no webhook configured gets a ``gave_up`` fact saying so.

Its ports: ``FactSink`` (the home journal) and ``NotificationSender`` (the webhooks:
``hearth_automations.adapters.webhooks``); ``Outcome`` is what a send came to.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import msgspec

from hearth_shared.domain.home_facts import (
    HomeFact,
    NotificationDelivered,
    NotificationGaveUp,
    NotificationPayload,
)
from hearth_shared.domain.home_view import HomesView

log = logging.getLogger(__name__)


class FactSink(Protocol):
    async def append(self, fact: HomeFact) -> None: ...


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """How sending one notification ended: delivered or not, after how many attempts, with the last
    HTTP status or error."""

    delivered: bool
    attempts: int
    status: int | None = None
    error: str = ""


class NotificationSender(Protocol):
    async def send(self, url: str, secret: str, notification_id: str, content: dict[str, Any]) -> Outcome: ...


class Notifier:
    def __init__(
        self, view: HomesView, sink: FactSink, sender: NotificationSender, clock: Callable[[], datetime]
    ) -> None:
        self.view = view
        self.sink = sink
        self.sender = sender
        self.clock = clock
        self.inflight: dict[uuid.UUID, asyncio.Task[None]] = {}

    def enqueue(self, home_id: str, notification_id: uuid.UUID, content: dict[str, Any]) -> None:
        if notification_id in self.inflight or notification_id not in self.view.unsent:
            return
        task = asyncio.create_task(
            self._deliver(home_id, notification_id, content), name=f"notify-{notification_id}"
        )
        self.inflight[notification_id] = task
        task.add_done_callback(lambda _: self.inflight.pop(notification_id, None))

    async def _deliver(self, home_id: str, notification_id: uuid.UUID, content: dict[str, Any]) -> None:
        target = self.view.notifications.get(home_id)
        automation_id = uuid.UUID(content["automation_id"]) if content.get("automation_id") else None
        if target is None:
            payload = NotificationPayload(
                notification_id=notification_id, automation_id=automation_id, attempts=0,
                error="the home has no webhook (PUT /v1/homes/{home_id}/notifications)",
            )  # fmt: skip
            fact: HomeFact = self._fact(NotificationGaveUp, home_id, payload)
        else:
            content = {**content, "sent_at": self.clock().isoformat()}
            outcome = await self.sender.send(target.webhook_url, target.secret, str(notification_id), content)
            payload = NotificationPayload(
                notification_id=notification_id, automation_id=automation_id, attempts=outcome.attempts,
                status=outcome.status, error=outcome.error,
            )  # fmt: skip
            kind = NotificationDelivered if outcome.delivered else NotificationGaveUp
            fact = self._fact(kind, home_id, payload)
        try:
            await self.sink.append(fact)
        except Exception:
            log.exception("could not record the outcome of notification %s", notification_id)
            return
        self.view.apply(fact)

    def _fact(
        self,
        kind: type[NotificationDelivered] | type[NotificationGaveUp],
        home_id: str,
        payload: NotificationPayload,
    ) -> HomeFact:
        now = self.clock()
        return kind(
            fact_id=payload.notification_id,
            home_id=home_id,
            occurred_at=now,
            recorded_at=now,
            payload=payload,
        )

    async def stop(self) -> None:
        for task in list(self.inflight.values()):
            task.cancel()
        await asyncio.gather(*self.inflight.values(), return_exceptions=True)
