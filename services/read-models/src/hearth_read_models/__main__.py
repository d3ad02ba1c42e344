"""``python -m hearth_read_models projector|api|migrate|init`` (init: create the Kafka topics, then migrate;
compose runs it once before the services start)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from hearth_read_models.settings import ReadModelSettings

USAGE = "usage: python -m hearth_read_models projector|api|migrate|init"


def query_app(settings: ReadModelSettings) -> FastAPI | str:
    """One process: the app itself. Several: where each worker finds it, to build it from the same
    environment; the master process then never imports it, an import of 1.4 s (2.1 s with it, 0.7 s
    without) before the master could start the workers, on every start and restart of the query API."""
    if settings.api_workers > 1:
        return "hearth_read_models.query.app:make_app"
    from hearth_read_models.query.app import make_app

    return make_app(settings)


def main() -> None:
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "projector":
        from hearth_read_models.projection.app import main as projector

        projector()
    elif what == "api":
        import uvicorn

        from hearth_read_models.live import subscribe_message, ws_protocol
        from hearth_read_models.settings import ReadModelSettings

        settings = ReadModelSettings()
        uvicorn.run(
            query_app(settings),
            factory=settings.api_workers > 1,
            workers=settings.api_workers,
            host=settings.host,
            port=settings.port,
            access_log=False,
            # uvicorn's websockets-sansio ("auto" picks it too; framing a change: ~2 us of ~40 per client),
            # closing clients that do not read with 4408 (see ws_protocol)
            ws=ws_protocol.PATH,
            ws_per_message_deflate=settings.ws_per_message_deflate,
            ws_max_size=settings.subscribe_max_message_bytes * subscribe_message.TRANSPORT_LIMIT_FACTOR,
            ws_ping_interval=settings.ws_ping_interval_s,
            ws_ping_timeout=settings.ws_ping_timeout_s,
        )
    elif what in ("migrate", "init"):
        import asyncio

        from hearth_read_models.settings import ReadModelSettings
        from hearth_read_models.store.db import migrate
        from hearth_shared.adapters.kafka import ensure_topics

        settings = ReadModelSettings()
        if what == "init":
            asyncio.run(ensure_topics(settings.stack.kafka_bootstrap_servers, settings.stack.topics.specs()))
        migrate(settings.stack.postgres_dsn, settings.schema_name)
    else:
        sys.exit(USAGE)


if __name__ == "__main__":
    main()
