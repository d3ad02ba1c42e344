"""The one topic follower: every part that folds topics into memory (the command API's devices and
commands, broker access, the automations engine, the campaign views, the query API's home view, token
revocations, the device actor's anomaly models) reads them with ``TopicFollower``. Parts that write what
they read elsewhere with its offsets (the projector's rows, the device actor's twins and inbox commits,
the gateway's downlink) keep their own consumers: their position is stored with their output, not here.

It reads from a snapshot's positions when it has one (``snapshots=SnapshotPolicy(...)``), else from the
first offset, hands each record to ``on_record`` and follows the topics from there on. With a policy it
saves a new snapshot of the fold, with the positions it reflects, after a poll once ``every_s`` passed
or ``after_records`` were read since the last one, and when stopped; so a restart reads at most about a
minute of the topics, whatever their age, and the state's size, not the history's, bounds its memory.

Invariants:

* positions are counted per record handed over, never from the consumer's fetch position: a snapshot
  taken between two polls (or while ``on_record`` awaits) holds exactly the records its state folded;
* a record the follower cannot use (``on_record`` raising) is logged and skipped with its reason: one
  bad record never stops a feed;
* ``caught_up`` is set once every partition was read to the end offsets seen at start-up (a compacted
  topic whose last records were removed counts as read once the fetch position is past its end);
  /healthz waits for it, so a restarted process never answers from half a fold;
* ``after_poll`` (optional) is awaited after each poll's records were handed over, before the feed
  counts them as read and before a snapshot: a consumer that batches its writes per poll flushes there.
  It raising is not a bad record but a failed sink: the feed stops, and ``wait_caught_up`` and
  ``failure`` report it;
* ``on_caught_up`` (optional) is awaited once, when the start-up ends are read (after that poll's
  ``after_poll``, or before the first poll if there was nothing to read) and before ``caught_up`` is set:
  a consumer whose first output needs the whole fold (broker access writes the broker's files and
  reloads it) does it there, so ``caught_up`` means that output is done. It raising stops the feed as
  ``after_poll`` raising does;
* ``after`` (optional, another follower): each poll's records wait, before any is handed over, until
  ``after`` has handed over every record its topics had when the poll came back (``read_to_end``). Two
  topics are not ordered one against the other; a consumer whose records must be seen after what was
  written before them on another topic (the automations engine: a trigger fact after the automation
  created a moment before it, on the home journal) says so here. The price is one ListOffsets request
  per poll that brought records, and a wait only when ``after`` is behind;
* with ``HEARTH_FOLLOWER_REPORTS`` set to a directory (the local stack sets one per part), the follower
  writes its ``RestartReport`` there as ``{name}.json`` once caught up and after each snapshot, which
  ``hearth status`` shows (snapshot age, what the last start read);
* a snapshot that cannot be read or restored is reported (``restart.started_from``) and the fold starts
  from the first offset: a warning, never a crash loop. Positions a retention window has passed
  (snapshot older than the topic's head) are counted in ``restart.gap`` and logged as an error: the
  records between are gone from the topic (the archive still has them).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition

from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.snapshots import KafkaSnapshotStore, SnapshotStore, SnapshotUnreadable
from hearth_shared.schema.events import utcnow
from hearth_shared.schema.snapshot_format import NotNow, Positions

log = logging.getLogger(__name__)

OnRecord = Callable[[str, int, int, bytes | None], Awaitable[None]]
AfterPoll = Callable[[], Awaitable[None]]
OnCaughtUp = Callable[[], Awaitable[None]]


class Snapshotting(Protocol):
    """A fold that can be saved and restored as bytes.

    ``restore`` replaces the whole state with the saved one, or raises and leaves it as it was (decode
    everything first, then assign). The bytes are a format the fold owns and keeps readable across
    releases (a versioned msgspec struct), since a snapshot may be all that is left of a fact the
    retention window removed."""

    def snapshot(self) -> bytes: ...  # or raises ``NotNow``: not at this moment, asked again later

    def restore(self, data: bytes) -> None: ...


@dataclass
class SnapshotPolicy:
    store: SnapshotStore
    name: str  # one per fold; processes of one part that fold the same topics alike may share it
    state: Snapshotting
    every_s: float = 60.0
    after_records: int = 500_000


def snapshot_policy(
    stack: StackSettings, name: str, state: Snapshotting, *, store: SnapshotStore | None = None
) -> SnapshotPolicy:
    """The policy of a part of ``stack``: its snapshots on the stack's snapshots topic (or ``store``, a
    test's), every ``stack.snapshot_every_s`` (``HEARTH_SNAPSHOT_EVERY_S``)."""
    store = store or KafkaSnapshotStore(stack.kafka_bootstrap_servers, stack.topics.snapshots)
    return SnapshotPolicy(store, name, state, every_s=stack.snapshot_every_s)


@dataclass
class RestartReport:
    """What the follower's last start read: shown by ``hearth status`` through the part's health."""

    started_from: str = "first offset"  # or "snapshot", or why a snapshot was not used
    snapshot_taken_at: datetime | None = None
    snapshot_records: int = 0  # records the snapshot had folded
    replayed: int = 0  # records read after the snapshot (or from the first offset) until caught up
    gap: int = 0  # records between the snapshot's positions and the topics' heads, gone by retention
    caught_up_s: float | None = None
    last_snapshot_at: datetime | None = None  # the newest snapshot this process saved or restored
    snapshots_saved: int = 0
    snapshot_errors: int = 0

    def as_json(self) -> dict[str, Any]:
        now = utcnow()
        age = (now - self.last_snapshot_at).total_seconds() if self.last_snapshot_at else None
        return {
            "started_from": self.started_from,
            "snapshot_taken_at": _iso(self.snapshot_taken_at),
            "replayed": self.replayed,
            "gap": self.gap,
            "caught_up_s": None if self.caught_up_s is None else round(self.caught_up_s, 3),
            "snapshot_age_s": None if age is None else round(age, 1),
            "snapshots_saved": self.snapshots_saved,
            "snapshot_errors": self.snapshot_errors,
        }


REPORTS_ENV = "HEARTH_FOLLOWER_REPORTS"


def write_report(name: str, report: RestartReport) -> None:
    """``report`` as ``{name}.json`` in the ``HEARTH_FOLLOWER_REPORTS`` directory, if one is set; atomic."""
    directory = os.environ.get(REPORTS_ENV)
    if not directory:
        return
    try:
        path = Path(directory) / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        partial.write_text(json.dumps(report.as_json()))
        partial.replace(path)
    except OSError as error:  # a report is for people; the feed goes on without it
        log.warning("%s: could not write its restart report: %s", name, error)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


@dataclass
class _Progress:
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    pending: dict[TopicPartition, int] = field(default_factory=dict)  # partition -> end seen at start
    folded: int = 0  # records in the state in all (the snapshot's count plus those read since)
    since_snapshot: int = 0
    snapshot_clock: float = 0.0


class TopicFollower:
    """Reads topics from a snapshot's positions (or their first offset), then follows them, handing each
    record to ``on_record``."""

    def __init__(
        self,
        bootstrap_servers: str,
        topics: list[str],
        on_record: OnRecord,
        name: str,
        *,
        after_poll: AfterPoll | None = None,
        on_caught_up: OnCaughtUp | None = None,
        max_records: int = 5000,
        poll_ms: int = 200,
        snapshots: SnapshotPolicy | None = None,
        consumer_settings: dict[str, Any] | None = None,
        after: TopicFollower | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topics = topics
        self.on_record = on_record
        self.after_poll = after_poll
        self.on_caught_up = on_caught_up
        self.max_records = max_records
        self.poll_ms = poll_ms
        self.name = name
        self.snapshots = snapshots
        self.consumer_settings = consumer_settings or {}
        self.after = after
        self.caught_up = asyncio.Event()
        self.skipped = 0
        self.restart = RestartReport()
        self._progress = _Progress()
        self._task: asyncio.Task[None] | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._started = 0.0
        self._readers: list[tuple[dict[TopicPartition, int], asyncio.Future[None]]] = []  # read_to_end's

    # ------------------------------------------------------------------------------------ start, stop

    async def start(self, positions: Positions | None = None) -> None:
        """Restore the policy's snapshot (if any), seek, and start reading. ``positions``: start there
        instead, without a snapshot of this follower's own: positions another follower's snapshot kept
        (the automations service's home-journal feed, whose positions its journal feed's snapshot holds;
        ``{}``: the first offset)."""
        self._started = time.monotonic()
        consumer = self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap_servers,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **self.consumer_settings,
        )
        await consumer.start()
        partitions = [tp for topic in self.topics for tp in await topic_partitions(consumer, topic)]
        consumer.assign(partitions)
        saved = await self._restore() if positions is None else self._given(positions)
        heads = await consumer.beginning_offsets(partitions)
        progress = self._progress
        for tp in partitions:
            position = saved.get(tp.topic, {}).get(tp.partition, 0)
            if position < heads[tp]:
                if saved:  # a snapshot's position the retention window passed
                    self.restart.gap += heads[tp] - position
                position = heads[tp]
            consumer.seek(tp, position)
            progress.positions[tp] = position
        if self.restart.gap:
            log.error(
                "%s: %d records between the snapshot and the topics' heads are gone (retention passed "
                "the snapshot); the state lacks them",
                self.name,
                self.restart.gap,
            )
        ends = await consumer.end_offsets(partitions)
        progress.pending = {tp: end for tp, end in ends.items() if end > progress.positions[tp]}
        progress.snapshot_clock = time.monotonic()
        self._task = asyncio.create_task(self._run(consumer), name=self.name)

    async def _restore(self) -> Positions:
        """The positions of the snapshot the state was restored from; {} when starting from the first
        offset (no policy, no snapshot, or one that could not be used: said in ``restart``)."""
        policy = self.snapshots
        if policy is None:
            return {}
        try:
            snapshot = await policy.store.load(policy.name)
            if snapshot is None:
                self.restart.started_from = "first offset (no snapshot yet)"
                return {}
            policy.state.restore(snapshot.state)
        except Exception as error:  # unreadable, or a format the fold cannot restore: fold it all again
            reason = error if isinstance(error, SnapshotUnreadable) else repr(error)
            log.warning("%s: snapshot not used, folding from the first offset: %s", self.name, reason)
            self.restart.started_from = f"first offset (snapshot unreadable: {reason})"
            return {}
        manifest = snapshot.manifest
        self.restart.started_from = "snapshot"
        self.restart.snapshot_taken_at = self.restart.last_snapshot_at = manifest.taken_at
        self.restart.snapshot_records = self._progress.folded = manifest.records
        log.info(
            "%s: restored the snapshot of %s (%d bytes)", self.name, _iso(manifest.taken_at), manifest.size
        )
        return manifest.positions

    def _given(self, positions: Positions) -> Positions:
        self.restart.started_from = "positions kept in another snapshot" if positions else "first offset"
        return positions

    def failure(self) -> BaseException | None:
        """Why the feed stopped (``after_poll`` raised), or None while it runs."""
        task = self._task
        if task is None or not task.done() or task.cancelled():
            return None
        return task.exception()

    async def wait_caught_up(self) -> None:
        """Until ``caught_up``; raises what stopped the feed if it stopped first."""
        if self._task is None:
            raise RuntimeError(f"{self.name}: start() has not been awaited")
        waiting = asyncio.ensure_future(self.caught_up.wait())
        try:
            await asyncio.wait({waiting, self._task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if not self.caught_up.is_set():
            failure = self.failure()
            raise RuntimeError(f"{self.name} stopped before it caught up") from failure

    async def wait_stopped(self) -> None:
        """Until the feed stops: raises what stopped it (``after_poll`` or ``on_caught_up`` raising), or
        returns if ``stop()`` ended it."""
        if self._task is None:
            raise RuntimeError(f"{self.name}: start() has not been awaited")
        await asyncio.wait({self._task})
        failure = self.failure()
        if failure is not None:
            raise failure

    async def stop(self) -> None:
        """Stops following; a follower that ran cleanly and read something since its last snapshot saves
        one more, so a planned restart reads nothing again."""
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
            failure = self.failure()  # reported already to whoever watched the feed
            if failure is not None:
                log.warning("%s had stopped: %r", self.name, failure)
            elif self.caught_up.is_set() and self._progress.since_snapshot:
                await self.save_snapshot()
        if self.snapshots is not None:
            await self.snapshots.store.close()
        if self._consumer is not None:
            await self._consumer.stop()

    async def read_to_end(self) -> None:
        """Until every record the topics hold now has been handed over (and its poll's ``after_poll``
        awaited); waits for the start-up's catch-up first. Raises what stopped the feed if it stops
        first."""
        await self.caught_up.wait()
        consumer, task = self._consumer, self._task
        assert consumer is not None and task is not None
        progress = self._progress
        ends = await consumer.end_offsets(list(progress.positions))
        behind = {tp: end for tp, end in ends.items() if end > progress.positions[tp]}
        if not behind:
            return
        reached = asyncio.get_running_loop().create_future()
        self._readers.append((behind, reached))
        try:
            await asyncio.wait({reached, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            reached.cancel()
        if not reached.done() or reached.cancelled():
            raise RuntimeError(f"{self.name} stopped before it read to the end") from self.failure()

    # ------------------------------------------------------------------------------------ positions

    def positions(self) -> Positions:
        """Per topic and partition, the offset of the first record not handed to ``on_record`` yet."""
        out: Positions = {}
        for tp, offset in self._progress.positions.items():
            out.setdefault(tp.topic, {})[tp.partition] = offset
        return out

    async def save_snapshot(self) -> None:
        """Save the state with the positions it reflects now. A failure is logged and counted; the next
        poll tries again (the feed goes on: the snapshot only shortens the next start)."""
        policy = self.snapshots
        if policy is None:
            return
        progress = self._progress
        positions, folded = self.positions(), progress.folded
        try:
            state = policy.state.snapshot()
            manifest = await policy.store.save(policy.name, state, positions, folded)
        except NotNow as why:  # the fold's rule, not a failure: the next poll asks again
            log.debug("%s: %s", self.name, why)
            return
        except Exception:
            self.restart.snapshot_errors += 1
            log.exception("%s: saving a snapshot failed; the next poll tries again", self.name)
            progress.snapshot_clock = time.monotonic()
            return
        progress.since_snapshot = 0
        progress.snapshot_clock = time.monotonic()
        self.restart.last_snapshot_at = manifest.taken_at
        self.restart.snapshots_saved += 1
        write_report(self.name, self.restart)

    def _snapshot_due(self) -> bool:
        policy, progress = self.snapshots, self._progress
        if policy is None or not progress.since_snapshot:
            return False
        elapsed = time.monotonic() - progress.snapshot_clock
        return progress.since_snapshot >= policy.after_records or elapsed >= policy.every_s

    # ------------------------------------------------------------------------------------ the loop

    async def _run(self, consumer: AIOKafkaConsumer) -> None:
        progress = self._progress
        await self._check_caught_up()
        while True:
            batches = await consumer.getmany(timeout_ms=self.poll_ms, max_records=self.max_records)
            if batches and self.after is not None:
                await self.after.read_to_end()
            for tp, records in batches.items():
                for record in records:
                    try:
                        await self.on_record(record.topic, record.partition, record.offset, record.value)
                    except Exception:
                        self.skipped += 1
                        log.exception(
                            "%s skips %s[%d]@%d", self.name, record.topic, record.partition, record.offset
                        )
                    progress.positions[tp] = record.offset + 1
                    progress.folded += 1
                    progress.since_snapshot += 1
                    if not self.caught_up.is_set():
                        self.restart.replayed += 1
            if self.after_poll is not None and batches:
                await self.after_poll()
            if progress.pending:
                await self._past_compacted_ends(consumer, batches, progress.pending)
                await self._check_caught_up()
            if self._readers:
                await self._answer_readers(consumer, batches)
            if self._snapshot_due():
                await self.save_snapshot()

    async def _answer_readers(self, consumer: AIOKafkaConsumer, batches: dict[Any, Any]) -> None:
        progress, waiting = self._progress, []
        for ends, reached in self._readers:
            if reached.done():  # its reader went away (cancelled)
                continue
            await self._past_compacted_ends(consumer, batches, ends)
            if all(progress.positions[tp] >= end for tp, end in ends.items()):
                if not reached.done():  # (or cancelled while this awaited the positions)
                    reached.set_result(None)
            else:
                waiting.append((ends, reached))
        self._readers = waiting

    async def _past_compacted_ends(
        self, consumer: AIOKafkaConsumer, batches: dict[Any, Any], ends: dict[TopicPartition, int]
    ) -> None:
        """A partition behind ``ends`` that gave nothing this poll may be a compacted one whose last
        records were removed (or one whose last offset is a transaction marker): its fetch position then
        already stands at (or past) the end."""
        progress = self._progress
        for tp in list(ends):
            if tp not in batches and progress.positions[tp] < ends[tp]:
                position = await consumer.position(tp)
                if position >= ends[tp]:
                    progress.positions[tp] = max(progress.positions[tp], position)

    async def _check_caught_up(self) -> None:
        progress = self._progress
        for tp in list(progress.pending):
            if progress.positions[tp] >= progress.pending[tp]:
                del progress.pending[tp]
        if not progress.pending and not self.caught_up.is_set():
            if self.on_caught_up is not None:
                await self.on_caught_up()
            self.restart.caught_up_s = time.monotonic() - self._started
            log.info(
                "%s caught up in %.1f s (%s, %d records read)",
                self.name,
                self.restart.caught_up_s,
                self.restart.started_from,
                self.restart.replayed,
            )
            self.caught_up.set()
            write_report(self.name, self.restart)
