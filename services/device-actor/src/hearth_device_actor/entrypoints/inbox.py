"""The inbox, read in batches by the worker's own consumer, for the partitions whose twins it holds.

faust hands a topic's records to an agent one at a time (each through a task and a queue; a do-nothing
agent reached about 9,000 records/s here), so the hot path does not run on a faust stream. faust keeps
what it is good at: the consumer-group membership, the twins table, its changelog and its recovery
after a rebalance. This feed reads the inbox partitions with the same numbers as the table's active
changelog partitions (``assign``, called once the table has recovered them), hands them to the actors
in batches, and commits the offsets it handled to its own consumer group, after the batch's facts are
in the journal and the twins' changelog writes are flushed. So neither the changelog nor a committed
offset is ever ahead of the journal, and a partition's next owner starts where the last one stopped.

Each commit records the journal's end offset in its metadata, and a worker that is assigned a partition
first folds the journal from there into its twins (catch_up.py): what a killed worker appended but did
not commit is then known, and reading its requests again appends nothing twice.

Two lanes (``Topics.inbox_lanes``: the command lane, then telemetry), co-partitioned: the worker reads
partition p of both. Each round hands the actors what is fetched of the command lane first, as a batch
of its own, and telemetry after it, so a command, an ack or a registration is decided and its facts
sent without waiting for the readings fetched with it. A command that comes while a batch of telemetry
is decided (up to ``batch_size`` readings: more than a second under load) does not wait for the batch
either: every ``check_commands_ms`` the actor asks for the command-lane records fetched meanwhile
(``commands_meanwhile``), records what it has decided so far, decides them, and goes on with the rest.
All of what is fetched: a round that had to wait
takes what came first, and aiokafka hands a fetch's partitions back in the order it shuffled them into
its request, up to ``max_records``, so a whole batch of telemetry can come back while the command that
came in the same fetch stays in the consumer's buffer; the round then asks for the command lane again,
without waiting (``_next_round``). A device's requests on different lanes may be decided out of their
arrival order; that is safe by the domain's own rules: a state report carries the device's sequence
number (an older one arriving late changes nothing), and commands, acks and lifecycle requests are never
reordered among themselves (one lane, one partition). Both lanes are committed together, with the same
journal offset, so the catch-up is as above.

Kept offsets: Kafka forgets a group's committed offsets ``offsets.retention.minutes`` after their last
commit when the group has no subscribed members, which this one never has (default 7 days; Hearth's
broker configs set a year). A partition whose inbox is quiet for that long would lose its commit, and its
next owner would catch its twins up from the journal partition's first offset: correct, but a read that
grows with history. So a worker re-commits the offsets it holds, with the journal's end then, every
``recommit_after_s`` (an hour) even when nothing was handled: the same invariant as any commit (taken
under the lock, after the changelog is flushed).

Fetch wait: aiokafka has one fetch in flight per broker, and a partition whose records are still in
its buffer is left out of the next fetch. So while the worker handles a backlog of telemetry, the next
fetch asks only for the command lane, which is empty, and the broker holds it until a record comes or
``fetch.max.wait.ms`` passes (Kafka's default 500 ms); the telemetry the worker has meanwhile finished
cannot be fetched again before that. With the default, a worker draining a backlog spent about half its
time so (`hearth bench actor`: 10,400-12,500 reports/s against 21,400 with 20 ms). So the inbox consumer's
wait is short (``fetch_wait_ms``, 20 ms) while the worker is busy, and long (``idle_fetch_wait_ms``,
500 ms) once a round fetched nothing: an idle worker's fetch every 20 ms cost the broker about 4 % of a
core and the worker 4 % here, doing nothing. A command is not slowed by either: a held fetch comes back
at its first record, and the round that brings it sets the short wait again before the next fetch goes
out (aiokafka sends none for 100 ms after records came, its ``prefetch_backoff``).

Overload: when a telemetry partition of a batch is more than ``coalesce_after`` records behind its end,
the batch's state reports are coalesced (coalescing.py) instead of the lag growing without bound.
``lags`` says how far behind each lane is, for the serving file and ``hearth status``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from hearth_device_actor.adapters.catch_up import journal_offset_from, journal_offset_metadata
from hearth_device_actor.service.actor import CommandsMeanwhile, InboxRecord

log = logging.getLogger(__name__)

LOOP_TURNS = 8  # turns of the event loop the fetches get at each look for commands (_commands_meanwhile)
Fetched = dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]  # what getmany returns, per partition


def inbox_consumer(bootstrap_servers: str, group_id: str) -> AIOKafkaConsumer:
    """The feed's consumer: ``group_id`` for its commits only (it is never subscribed: the partitions
    come from faust); fetches not held for bytes (see ``held_fetches`` for why the hot path does not).
    How long the broker may hold a fetch when nothing is there, the feed sets (Fetch wait, above)."""
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )


class BatchHandler(Protocol):
    """Decides a batch (``DeviceActors.handle_batch``); ``coalesce_reports`` when telemetry is behind;
    ``commands_meanwhile`` to ask, while it decides, for commands that came meanwhile."""

    def __call__(
        self,
        records: list[InboxRecord],
        *,
        coalesce_reports: bool = False,
        commands_meanwhile: CommandsMeanwhile | None = None,
    ) -> Awaitable[None]: ...


class InboxFeed:
    def __init__(
        self,
        make_consumer: Callable[[], AIOKafkaConsumer],  # with a group_id for its commits; never subscribed
        lanes: Sequence[str],  # the inbox's lanes, the one served first first (``Topics.inbox_lanes``)
        handle: BatchHandler,
        flush_changelog: Callable[[], Awaitable[None]],
        lock: asyncio.Lock,  # held while a batch is handled; the deadline timer takes it too
        *,
        journal_topic: str,
        catch_up: Callable[[dict[int, int]], Awaitable[int]],  # journal partition -> offset to read from
        batch_size: int,
        commit_interval_s: float = 0.5,
        recommit_after_s: float = 3600.0,  # re-commit held offsets this often when idle (see above)
        coalesce_after: int = 0,  # records a telemetry partition may be behind before its reports coalesce
        fetch_waits_ms: tuple[int, int],  # (busy, idle): the most the broker holds a fetch (Fetch wait)
    ) -> None:
        self.make_consumer = make_consumer
        self._consumer: AIOKafkaConsumer | None = None
        self.lanes = tuple(lanes)
        self.handle = handle
        self.flush_changelog = flush_changelog
        self.lock = lock
        self.journal_topic = journal_topic
        self.catch_up = catch_up
        self.batch_size = batch_size
        self.coalesce_after = coalesce_after
        self.commit_interval_s = commit_interval_s
        self.recommit_after_s = recommit_after_s
        self.fetch_waits_ms = fetch_waits_ms
        self.handled: dict[TopicPartition, int] = {}  # next offset to commit, per partition
        self.committed: dict[TopicPartition, int] = {}  # the group's offsets of the partitions read now
        self._last_write = time.monotonic()  # of a commit that reached the broker
        self.generation = 0  # one more at every assignment or revocation: older fetches are dropped
        self._started = asyncio.Event()
        self._assigned = asyncio.Event()
        self._last_commit = time.monotonic()
        self.first_lane: list[TopicPartition] = []  # the partitions of the lane served first

    @property
    def consumer(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("InboxFeed.start() has not been awaited")
        return self._consumer

    async def start(self) -> None:
        """Start the consumer (once; the first assignment may come before the worker starts services)."""
        if self._consumer is None:
            self._consumer = self.make_consumer()  # needs a running loop
            await self._consumer.start()
            self._wait_as(busy=True)  # the first fetches, before a round says otherwise
            self._started.set()
        await self._started.wait()

    async def stop(self) -> None:
        """Commit what was handled, so a restart need not redo it, and stop reading.

        No unassignment first (as ``revoke`` does): aiokafka's fetch routine, woken by it, awaits its
        cancelled fetches and swallows the close's cancel there (aio-libs/aiokafka#983), so a worker
        stopped right after a broker came back hung in ``consumer.stop()`` until it was killed (20 s in
        test_broker_kill's teardown, every run)."""
        if self._consumer is not None:
            try:
                async with self.lock:
                    await self._pause_and_commit()
            finally:
                await self._consumer.stop()

    async def assign(self, partitions: set[int]) -> None:
        """Read these inbox partitions from their committed offsets (the table holds their twins now)."""
        await self.start()
        async with self.lock:
            tps = [TopicPartition(lane, p) for lane in self.lanes for p in sorted(partitions)]
            self.consumer.assign(tps)
            self.first_lane = [tp for tp in tps if tp.topic == self.lanes[0]]
            # The offset and its metadata; aiokafka's public committed() drops the metadata.
            committed = await self.consumer._coordinator.fetch_committed_offsets(tps)
            since: dict[int, int] = {}  # the lanes are committed together; the lower one if they differ
            for tp, meta in committed.items():
                if (journal_offset := journal_offset_from(meta.metadata or "")) is not None:
                    since[tp.partition] = min(since.get(tp.partition, journal_offset), journal_offset)
            # A partition no lane has a journal offset for (a fresh stack, or its last owner was killed
            # before its first commit) is read again from its start, so its twins are caught up with the
            # whole journal partition: else the facts that owner appended would be decided a second time.
            for partition in partitions:
                since.setdefault(partition, 0)
            await self.catch_up(since)
            self.committed = {tp: committed[tp].offset for tp in tps if tp in committed}
            for tp, offset in self.committed.items():
                self.consumer.seek(tp, offset)
            # All at once: each call waits for the fetcher's next offset reset (about 0.5 s), so one call
            # a partition kept a restarted worker out for 5.6 s when a lane had never been committed.
            if never_committed := [tp for tp in tps if tp not in committed]:
                await self.consumer.seek_to_beginning(*never_committed)
            self.generation += 1
            log.info("reading inbox partitions %s", sorted(partitions) or "none")
            if partitions:
                self._assigned.set()

    async def revoke(self) -> None:
        """Stop reading (a rebalance began): commit what was handled; the batch in hand finishes first."""
        if not self._started.is_set():
            return
        async with self.lock:
            await self._pause_and_commit()
            self.committed = {}  # not ours to keep any longer
            self.consumer.assign([])

    async def _pause_and_commit(self) -> None:
        """(Under the lock.) No round in hand is handled any more; what was handled is committed."""
        self.generation += 1
        self._assigned.clear()
        await self._commit()

    async def run(self) -> None:
        """Read and handle batches for as long as the worker runs."""
        while True:
            await self._assigned.wait()
            generation = self.generation
            fetched = await self._next_round()
            async with self.lock:
                if fetched and generation != self.generation:  # a rebalance came in between
                    fetched = await self._still_in_place(fetched)
                if fetched:
                    for lane in self.lanes:  # each lane's records a batch of its own, in lane order
                        lane_fetched = {tp: ms for tp, ms in fetched.items() if tp.topic == lane}
                        await self._handle(lane_fetched, first_lane=lane == self.lanes[0])
                if time.monotonic() - self._last_commit >= self.commit_interval_s:
                    await self._commit()

    async def _next_round(self) -> Fetched:
        """What the command lane has fetched already, without waiting; else whatever comes first, and
        then every command-lane record that came with it.

        The wait returns records in the consumer's buffer order, which is the fetch's partition order
        (shuffled by aiokafka), cut at ``max_records``: telemetry may fill the batch while a command of
        the same fetch is left behind, to be decided only after that batch (a worker starting with a
        backlog met this: 200 of a device's readings decided before its command)."""
        if commands := await self._first_lane_fetched():
            self._wait_as(busy=True)
            return commands
        fetched: Fetched = await self.consumer.getmany(timeout_ms=200, max_records=self.batch_size)
        self._wait_as(busy=bool(fetched))  # first thing: before the fetcher builds its next fetch
        if fetched:
            for tp, records in (await self._first_lane_fetched()).items():
                fetched.setdefault(tp, []).extend(records)  # a partition the batch cut: the rest after it
        return fetched

    def _wait_as(self, *, busy: bool) -> None:
        """The broker holds the next fetches ``fetch_waits_ms`` (busy, idle) at most (Fetch wait, above).
        aiokafka reads its fetcher's wait each time it builds a fetch and has no public way to change it."""
        self.consumer._fetcher._fetch_max_wait_ms = self.fetch_waits_ms[0 if busy else 1]

    async def _still_in_place(self, fetched: Fetched) -> Fetched:
        """The records of a round that an assignment came in the middle of, which are still the next to
        handle: their partition is assigned, and no seek moved its position since they were fetched.

        Dropping the whole round lost requests: the round may have begun before ``assign`` and got its
        records after it, fetched from the positions ``assign`` had just set. The consumer's positions
        are past them then, so they were never read again (a test's worker handled none of 32 reports
        sent right after its re-assignment). Records fetched before the assignment are dropped here: its
        seek put their partition's position back at the group's committed offset, and they come again."""
        assigned = self.consumer.assignment()
        return {
            tp: records
            for tp, records in fetched.items()
            if tp in assigned and await self.consumer.position(tp) == records[-1].offset + 1
        }

    async def _first_lane_fetched(self) -> Fetched:
        """The command lane's records already in the consumer's buffer (no wait)."""
        fetched: Fetched = await self.consumer.getmany(
            *self.first_lane, timeout_ms=0, max_records=self.batch_size
        )
        return fetched

    async def _handle(self, fetched: Fetched, *, first_lane: bool) -> None:
        if not fetched:
            return
        await self.handle(
            _records(fetched),
            coalesce_reports=self._behind(fetched),
            commands_meanwhile=None if first_lane else self._commands_meanwhile,
        )
        self._handled(fetched)

    async def _commands_meanwhile(self) -> list[InboxRecord]:
        """(Under the lock, while a telemetry batch is decided.) The command lane's records fetched
        meanwhile, counted handled: the actor decides them before it goes on, and the offsets are
        committed after the round, as any other. The consumer's fetches run on this event loop, which a
        batch being decided holds: ``getmany`` without a wait does not let them run (it returns what is
        in the buffer at once), so this call first yields the loop a few turns (``LOOP_TURNS``: a fetch's
        answer takes several to reach the buffer; with one, a command came in after 88 % of a batch)."""
        for _ in range(LOOP_TURNS):
            await asyncio.sleep(0)
        fetched = await self._first_lane_fetched()
        self._handled(fetched)
        return _records(fetched)

    def _handled(self, fetched: Fetched) -> None:
        for tp, messages in fetched.items():
            self.handled[tp] = messages[-1].offset + 1

    def _behind(self, fetched: Fetched) -> bool:
        """Is a telemetry partition of this batch more than ``coalesce_after`` records behind its end?
        (Never the command lane: commands are never coalesced.)"""
        if not self.coalesce_after:
            return False
        for tp, messages in fetched.items():
            if tp.topic == self.lanes[0]:
                continue
            end = self.consumer.highwater(tp)  # as of the fetch that brought these records
            if end is not None and end - (messages[-1].offset + 1) > self.coalesce_after:
                return True
        return False

    @property
    def serving(self) -> bool:
        """Started and reading partitions (``lags`` can be asked)."""
        return self._assigned.is_set()

    async def lags(self) -> dict[str, int]:
        """Per lane, how many records its assigned partitions are behind their ends (as of the last fetch)."""
        lags = dict.fromkeys(self.lanes, 0)
        for tp in self.consumer.assignment():
            end = self.consumer.highwater(tp)
            with contextlib.suppress(KafkaError):  # revoked meanwhile (a rebalance): counted as caught up
                if end is not None:
                    lags[tp.topic] += max(0, end - await self.consumer.position(tp))
        return lags

    async def _commit(self) -> None:
        self._last_commit = now = time.monotonic()
        offsets, self.handled = self.handled, {}
        if not offsets and now - self._last_write >= self.recommit_after_s:
            offsets = dict(self.committed)  # nothing handled for a while: the same offsets again
        if not offsets:
            return
        # Every fact before these journal offsets has its twin in the changelog once it is flushed.
        journal = [TopicPartition(self.journal_topic, tp.partition) for tp in offsets]
        ends = await self.consumer.end_offsets(journal)
        await self.flush_changelog()  # the twins these offsets produced are in the changelog first
        await self.consumer.commit(
            {
                tp: (offset, journal_offset_metadata(ends[TopicPartition(self.journal_topic, tp.partition)]))
                for tp, offset in offsets.items()
            }
        )
        self.committed.update(offsets)
        self._last_write = now


def _records(fetched: Fetched) -> list[InboxRecord]:
    return [
        InboxRecord(m.topic, m.partition, m.offset, m.key, m.value) for ms in fetched.values() for m in ms
    ]
