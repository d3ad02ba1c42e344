"""How a rebuild's replay commits a batch into its private schema: faster than live, because nobody reads
that schema before the run ends and a failed replay's schema is dropped.

It folds the next batch while the last one is written (one write in flight at a time, on the projector's
connection), takes no lock and checks no generation, publishes nothing, commits with
``synchronous_commit=off`` (the swap commits durably), and writes its twins once per run, or when
``MAX_DIRTY_TWINS`` of them changed, instead of every batch. A record it cannot project is counted and
skipped (the projector has no dead letters: the live projector sent them). PostgreSQL refusing a batch
fails the replay.
"""

from __future__ import annotations

import asyncio
import contextlib

from hearth_read_models.projection.journal_source import Records
from hearth_read_models.projection.projector import Projector

MAX_DIRTY_TWINS = 100_000  # a replay writes its twins when this many changed, and when it stops


class ReplaySink:
    publishes = False
    sole_writer = True
    twin_batch = MAX_DIRTY_TWINS

    def __init__(self) -> None:
        self._writing: asyncio.Task[None] | None = None  # the batch being written

    async def opened(self, projector: Projector) -> None:
        await projector.store.conn.execute("SET synchronous_commit = off")

    async def take(self, projector: Projector, records: Records) -> None:
        batch = await projector.prepare(records)
        await self.drain()
        self._writing = asyncio.create_task(projector.commit(batch))

    async def drain(self) -> None:
        if self._writing is not None:
            writing, self._writing = self._writing, None
            await writing

    async def abandon(self) -> None:
        if self._writing is not None:  # failed or cancelled: the batch in flight is rolled back
            writing, self._writing = self._writing, None
            writing.cancel()
            with contextlib.suppress(BaseException):
                await writing
