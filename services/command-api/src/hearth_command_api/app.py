"""The command API's composition root: ``make_app(settings, *, writer=None, ...)``.

Nothing connects at import time; the lifespan starts the topic writer (one producer:
``adapters.topic_writer``), the device book's feed and the revocation feed (tokens revoked anywhere are
refused here within a second).

The device book's feed is a ``TopicFollower`` over the journal that restarts from a snapshot of the book
(``DEVICE_BOOK_SNAPSHOT`` on the snapshots topic) and reads only the journal's tail: every command-API
process folds the journal alike, so they share the one snapshot name. /healthz answers 503 until it has
caught up, and shows what its last start read (``restart``).

A held event loop (1 s or more) is logged, as are writes Kafka was slow to take (``KafkaWriter``): a
slow answer says which of the two it was, or neither (the client's side).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiokafka.errors import KafkaError
from fastapi import FastAPI, Request, Response, status
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from hearth_command_api.adapters.topic_writer import KafkaTopicWriter
from hearth_command_api.entrypoints.admin import router as admin_router
from hearth_command_api.entrypoints.automations import router as automations_router
from hearth_command_api.entrypoints.campaigns import router as campaigns_router
from hearth_command_api.entrypoints.credentials import router as credentials_router
from hearth_command_api.entrypoints.routes import router
from hearth_command_api.entrypoints.schedules import router as schedules_router
from hearth_command_api.entrypoints.tokens import router as tokens_router
from hearth_command_api.service.device_book import DeviceBook
from hearth_command_api.service.ports import CaughtUpFeed, TopicWriter
from hearth_command_api.settings import CommandApiSettings
from hearth_shared.adapters.campaign_feed import CampaignFeed
from hearth_shared.adapters.loop_lag import LoopLag
from hearth_shared.adapters.revocations import RevocationFeed
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.task_dump import dump_tasks_on_sigusr1
from hearth_shared.adapters.topic_follower import TopicFollower, snapshot_policy
from hearth_shared.schema.auth import Revocations
from hearth_shared.web.http_errors import install_edge

# The name the device book's snapshots are saved under: it was the "registry" when they were first saved,
# and snapshots already on the topic under this name must still load, so the name stays.
DEVICE_BOOK_SNAPSHOT = "command-api-registry"
LOOP_HELD_LOG_S = 1.0  # the event loop held this long is logged: every request waited as long


class Health(BaseModel):
    status: str
    restart: dict[str, Any] | None = Field(
        None,
        description="What the device book's journal feed read at its start: `started_from` (`snapshot` or "
        "`first offset ...`), `replayed` records, `gap`, `caught_up_s`, `snapshot_age_s`...",
    )


def device_book_feed(stack: StackSettings, book: DeviceBook) -> TopicFollower:
    """The journal, folded into ``book`` from its latest snapshot (or the first offset)."""
    return TopicFollower(
        stack.kafka_bootstrap_servers,
        [stack.topics.journal],
        book.on_journal_record,
        DEVICE_BOOK_SNAPSHOT,
        after_poll=book.after_poll,
        snapshots=snapshot_policy(stack, DEVICE_BOOK_SNAPSHOT, book),
    )


def make_app(
    settings: CommandApiSettings | None = None,
    *,
    writer: TopicWriter | None = None,
    book: DeviceBook | None = None,
    feed: CaughtUpFeed | None = None,
    revocations: Revocations | None = None,
    revocation_feed: RevocationFeed | None = None,
    campaign_feed: CampaignFeed | None = None,
) -> FastAPI:
    settings = settings or CommandApiSettings()
    stack = settings.stack
    book = book or DeviceBook(
        window_s=settings.command_window_s, longest_deadline_s=settings.max_expires_in_s
    )
    writer = writer or KafkaTopicWriter(stack.kafka_bootstrap_servers, stack.topics, "command-api")
    feed = feed or device_book_feed(stack, book)
    revocations = revocations if revocations is not None else Revocations()
    revocation_feed = revocation_feed or RevocationFeed(
        stack.kafka_bootstrap_servers, stack.topics, revocations
    )

    campaign_feed = campaign_feed or CampaignFeed(stack)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        dump_tasks_on_sigusr1()  # `kill -USR1 <pid>`: what every request and feed is waiting on
        await writer.start()
        await feed.start()
        await revocation_feed.start()
        await campaign_feed.start()
        lag = asyncio.create_task(LoopLag(LOOP_HELD_LOG_S, log_as="command-api").watch())
        try:
            yield
        finally:
            lag.cancel()
            await campaign_feed.stop()
            await revocation_feed.stop()
            await feed.stop()
            await writer.stop()

    app = FastAPI(
        title="Hearth command API",
        version="1.0.0",
        description="Send commands to devices; every command and its lifecycle is a fact in the journal.",
        lifespan=lifespan,
    )
    install_edge(app, max_body_bytes=settings.max_body_bytes)

    @app.exception_handler(KafkaError)
    async def kafka_refused(request: Request, error: KafkaError) -> JSONResponse:
        """A write Kafka did not take (a broker down, a leader moving): 503, and what to do about it."""
        detail = (
            f"the request could not be written to Kafka ({type(error).__name__}); it may or may not have "
            "been: send it again (a command with the same Idempotency-Key, which never makes a second one)"
        )
        return JSONResponse({"detail": detail}, status.HTTP_503_SERVICE_UNAVAILABLE, {"Retry-After": "1"})

    app.state.settings = settings
    app.state.token_secret = stack.token_secret
    app.state.revocations = revocations
    app.state.writer = writer
    app.state.book = book
    app.state.campaign_feed = campaign_feed
    app.include_router(router)
    app.include_router(tokens_router)
    app.include_router(credentials_router)
    app.include_router(schedules_router)
    app.include_router(automations_router)
    app.include_router(admin_router)
    app.include_router(campaigns_router)
    app.add_middleware(
        CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["*"], allow_headers=["*"]
    )

    @app.get(
        "/healthz",
        summary="200 once the API can serve (its device book has caught up)",
        responses={503: {"model": Health, "description": "Still catching up with the journal"}},
    )
    async def healthz(response: Response) -> Health:
        restart = feed.restart.as_json()
        if not feed.caught_up.is_set():
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
            return Health(status="catching up with the journal", restart=restart)
        if not revocation_feed.caught_up.is_set():
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
            return Health(status="catching up with the token revocations", restart=restart)
        return Health(status="ok", restart=restart)

    return app
