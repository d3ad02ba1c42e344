"""A replay's child processes: each replays one share of the journal's partitions (no rollups nor home
journal: the main process reads those) into the
replay's schema once told where to stop, and sends back its ``Tally`` and counts, or its error as text.
Told an archive snapshot too, it reads its share from the archive (``archive_source``) instead of Kafka.

Spawned (a fresh interpreter: no inherited event loop, sockets or connections), each with its own
consumer, connection and transactions, offsets with rows. The fold is pure Python, one core per process.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import traceback
from typing import Any, NamedTuple

from aiokafka import AIOKafkaConsumer

from hearth_read_models.projection.app import make_consumer
from hearth_read_models.projection.journal_source import Batching, JournalSource, Offsets, RecordSource
from hearth_read_models.projection.projector import Projector
from hearth_read_models.projection.view_store import Batch, ViewStore
from hearth_read_models.rebuild.archive_source import ArchiveSnapshot, ArchiveSource
from hearth_read_models.rebuild.checksums import Tally
from hearth_read_models.rebuild.replay_sink import ReplaySink
from hearth_read_models.settings import ReadModelSettings

REPLAY_WAIT_MS = 200  # a replay's fetch waits this long for records (it reads a backlog)


class RebuildFailed(RuntimeError):
    pass


class ShareResult(NamedTuple):
    tally: Tally
    events: int  # journal records read
    skipped: int  # records that could not be projected


def replay_projector(
    settings: ReadModelSettings,
    schema: str,
    consumer: AIOKafkaConsumer,
    batch_size: int,
    *,
    side_topics: bool,
    share: tuple[int, int] = (0, 1),
    archive: ArchiveSnapshot | None = None,
) -> Projector:
    """A projector into a replay's ``schema``: no dead letters (the live projector sent them). It reads
    the journal from Kafka (``side_topics``: the rollups and the home journal too), or (given
    ``archive``) that archive snapshot's share."""
    stack = settings.stack
    batching = Batching(size=batch_size, wait_ms=REPLAY_WAIT_MS)
    source: RecordSource
    if archive is not None:
        source = ArchiveSource(archive, stack.topics.journal, batching=batching, share=share)
    else:
        source = JournalSource(
            consumer,
            stack.topics.journal,
            rollups=stack.topics.rollups if side_topics else None,
            home_journal=stack.topics.home_journal if side_topics else None,
            batching=batching,
            share=share,
        )
    return Projector(source, ViewStore(stack.postgres_dsn, schema, settings.consumer_name), ReplaySink())


class ReplayShare:
    """One child process, started at once (it takes seconds to import); ``go`` sets it to work."""

    def __init__(
        self, settings: ReadModelSettings, schema: str, batch_size: int, share: tuple[int, int]
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self.progress = context.Array("q", 2, lock=False)  # records projected, sum of committed offsets
        self.receiver, sender = context.Pipe(duplex=False)
        orders, self.sender = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_replay_share,
            args=(settings, schema, batch_size, share, self.progress, orders, sender),
            name=f"hearth-replay-{share[0]}-of-{share[1]}",
            daemon=True,
        )
        self.process.start()
        sender.close()
        orders.close()

    def go(self, stop_at: Offsets, archive: ArchiveSnapshot | None = None) -> None:
        """Replay the share up to ``stop_at`` from Kafka, or from ``archive``."""
        self.sender.send((stop_at, archive))

    @property
    def events(self) -> int:
        return int(self.progress[0])

    @property
    def position(self) -> int:
        return int(self.progress[1])

    async def result(self) -> ShareResult:
        outcome = await asyncio.to_thread(self._receive)
        if isinstance(outcome, str):
            raise RebuildFailed(f"{self.process.name} failed:\n{outcome}")
        if not isinstance(outcome, ShareResult):
            raise RebuildFailed(f"{self.process.name} sent {type(outcome).__name__}, not a result")
        return outcome

    def _receive(self) -> object:
        try:
            received: object = self.receiver.recv()
        except EOFError:
            self.process.join()
            return f"it ended with exit code {self.process.exitcode} and no result"
        return received

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
        self.process.join()
        self.receiver.close()
        self.sender.close()


def _replay_share(
    settings: ReadModelSettings,
    schema: str,
    batch_size: int,
    share: tuple[int, int],
    progress: Any,
    orders: Any,
    sender: Any,
) -> None:
    """A child's part of a replay (see ``ReplayShare``)."""
    gc.disable()
    try:
        stop_at, archive = orders.recv()
        sender.send(
            asyncio.run(_project_share(settings, schema, batch_size, stop_at, share, progress, archive))
        )
    except EOFError:
        pass  # the replay ended before it had work for this share
    except BaseException:
        sender.send(traceback.format_exc())
    finally:
        sender.close()


async def _project_share(
    settings: ReadModelSettings,
    schema: str,
    batch_size: int,
    stop_at: Offsets,
    share: tuple[int, int],
    progress: Any,
    archive: ArchiveSnapshot | None,
) -> ShareResult:
    tally = Tally()
    consumer = make_consumer(settings.stack)
    projector = replay_projector(
        settings, schema, consumer, batch_size, side_topics=False, share=share, archive=archive
    )

    def committed(batch: Batch) -> None:
        tally.add(batch)
        progress[0], progress[1] = projector.stats.events, sum(projector.positions.values())

    projector.on_commit = committed
    await consumer.start()
    try:
        await projector.start()
        await projector.run(stop_at=stop_at)
    finally:
        await projector.stop()
        await consumer.stop()
    return ShareResult(tally, projector.stats.events, projector.stats.dead_letters)
