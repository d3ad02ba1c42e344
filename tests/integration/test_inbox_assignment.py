"""A round of the device actor's inbox feed that an assignment came in the middle of loses nothing
(inbox.py ``_still_in_place``).

A round may begin before ``assign`` and get its records after it, fetched from the positions ``assign``
had just set; the consumer's positions are past them then. The feed once dropped every record of such a
round, so they were never read again: test_journal_once's worker, re-assigned by its commit, then
handled none of the reports sent right after (seen under load, about 1 run in 10). Here the round is
held open across the assignment on purpose, so the race happens every run.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from hearth_device_actor.entrypoints.inbox import Fetched
from hearth_shared.adapters.settings import StackSettings
from tests.support.inbox_requests import register_request, report_request
from tests.support.inbox_worker import Worker, submit

pytestmark = pytest.mark.integration


async def test_records_of_a_round_an_assignment_came_into_are_handled(
    broker_only: StackSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = broker_only
    devices = [f"straddle-{uuid.uuid4().hex[:6]}-{i}" for i in range(4)]
    registrations = [register_request(device_id, home_id="straddle") for device_id in devices]
    reports = [report_request(device_id, 1, ambient_c=20.5) for device_id in devices]
    worker = Worker(settings, {}, catch_up=False)
    await worker.start()
    try:
        await submit(settings, registrations)
        await worker.handled(len(registrations))

        feed = worker.feed
        next_round = feed._next_round
        in_round, assigned = asyncio.Event(), asyncio.Event()

        async def round_across_the_assignment() -> Fetched:
            in_round.set()
            await assigned.wait()
            monkeypatch.setattr(feed, "_next_round", next_round)  # this round only
            while not (fetched := await next_round()):
                pass  # (each call waits up to 200 ms for records)
            return fetched

        monkeypatch.setattr(feed, "_next_round", round_across_the_assignment)
        await in_round.wait()  # the feed's loop is in the round, with the generation before
        await worker.commit()  # revoke and assign again: the positions are set anew
        await submit(settings, reports)
        assigned.set()

        await worker.handled(len(registrations) + len(reports))
    finally:
        await worker.stop()
