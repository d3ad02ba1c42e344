"""``python -m hearth_automations``: run one automations process (no web server) until SIGTERM or SIGINT,
which stop it cleanly: the journal feed saves a snapshot, so the next start reads only what came after."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from hearth_automations.app import AutomationsService, make_app
from hearth_automations.settings import AutomationsSettings
from hearth_shared.adapters.collector import collect_less_often
from hearth_shared.adapters.stop_signals import stop_on_signals


async def run_until_signalled(service: AutomationsService) -> None:
    stopping = stop_on_signals()
    running = asyncio.create_task(service.run(), name="automations")
    signalled = asyncio.create_task(stopping.wait())
    await asyncio.wait({running, signalled}, return_when=asyncio.FIRST_COMPLETED)
    signalled.cancel()
    if running.done():
        running.result()  # what stopped it: the process exits with it and its supervisor restarts it
        return
    running.cancel()  # run() stops the service on its way out
    with contextlib.suppress(asyncio.CancelledError):
        await running


def main() -> None:
    settings = AutomationsSettings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    collect_less_often()  # its replayed state is frozen once started (AutomationsService.run)
    asyncio.run(run_until_signalled(make_app(settings)))


if __name__ == "__main__":
    main()
