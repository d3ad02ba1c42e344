"""The device agents' loop, free of faust: decode a batch of inbox records, decide, record, evolve.

For every request the pure domain decides which facts to record; they get envelopes with the device's
next versions, are appended to the journal (acks=all) and folded into the twin. Only once the broker has
a batch's facts are its twins written to the table (one changelog write per device per batch, not per
event); the inbox offsets are committed after that, once the changelog is flushed (entrypoints/inbox.py),
so neither the changelog nor a committed offset is ever ahead of the journal. Dispatched commands go to
the device-bound topic. Deadlines (command expiry, devices falling silent) are checked by ``tick`` from
an index, so a silent device still expires its commands, a chunk of twins at a time between the inbox's
batches (``check_deadlines``).

No request can stop the actor: each is decoded and checked (``hearth_shared.domain.storable.decode_request``:
ids by the one pattern, no NUL or control characters, flat state, 64-bit integers) before anything is
decided, and one that fails, or whose decision raises, becomes a dead letter with its reason; its facts
are dropped whole (never half of them), and the rest of the batch goes on.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from hearth_device_actor.service.coalescing import Coalesced, coalesce
from hearth_shared.domain import (
    DEFAULT_MODEL,
    Twin,
    decide,
    decode_twin,
    detect_anomalies,
    encode_twin,
    evolve,
    late_report,
    stamp,
    tick,
)
from hearth_shared.domain.storable import decode_request
from hearth_shared.schema.events import (
    AnomalyModel,
    CommandDispatched,
    DeviceCommand,
    Event,
    Inbound,
    MalformedRecord,
    RegisterDevice,
    ReportState,
    StateReported,
    utcnow,
)

log = logging.getLogger(__name__)

# Fact ids are derived, not random: a request processed twice (a worker restarted after recording its
# facts but before committing its inbox offsets) yields the very same facts, ids included, so every
# consumer can drop the second copy.
TICK_IDS = uuid.UUID("6c1f0e1e-8d0b-4f55-9a43-2f2d8f1c0b7a")


@dataclass(frozen=True, slots=True)
class InboxRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


class Outbox(Protocol):
    """Where the actor's output goes: the journal, the device-bound topic and the dead letters."""

    async def send(self, events: list[Event], commands: list[DeviceCommand]) -> None:
        """Returns once the broker has all of them."""

    async def dead_letter(self, record: InboxRecord, error: Exception) -> None: ...


# The command-lane records that came while a batch of telemetry is decided (none: an empty list). A
# command waits for the telemetry decided before it by at most ``check_commands_s`` so, and for the
# writing of what was decided so far, not for the whole batch (up to ``batch_size`` readings). Deciding is
# the small part of a batch (about 15 us a reading); writing its facts and twins is most of it.
CommandsMeanwhile = Callable[[], Awaitable[list[InboxRecord]]]


class JournalGap(RuntimeError):
    """A twin is behind the journal by more than the facts read after it (``DeviceActors.catch_up``)."""


class DeviceActors:
    def __init__(
        self,
        twins: MutableMapping[bytes, bytes],  # device_id (bytes, as the inbox key) -> Twin (msgpack)
        outbox: Outbox,
        *,
        offline_after_s: float,
        check_commands_s: float = 0.02,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.twins = twins
        self.check_commands_s = check_commands_s
        self.outbox = outbox
        self.offline_after = timedelta(seconds=offline_after_s)
        self.clock = clock
        # device_id (the table's own key object) -> its next deadline, POSIX seconds: one per live twin,
        # so kept small (a million twins cost about 100 MB here, not 200).
        self.deadlines: dict[bytes, float] = {}
        self.processed = 0  # inbox records handled, and in how many batches (for the progress log)
        self.batches = 0
        self.model: AnomalyModel = DEFAULT_MODEL  # replaced by each newer version the analytics publish
        self.coalesced = Coalesced()  # state reports folded into newer ones under overload (coalescing.py)
        # State reports with nothing to record (``late_report``): each key they carry was carried by a report
        # at or above their seq, so no fact: a redelivery, or a report newer ones overtook whole.
        self.late_reports = 0
        # Requests for a device the twins do not know (no registration yet, or none ever), so no fact: a
        # device's seam that reported before its registration was decided, or a planted record. Counted,
        # so a device that never comes online says why in `hearth status`.
        self.unknown_device_requests = 0

    def use_model(self, model: AnomalyModel) -> None:
        if model.version > self.model.version:
            log.info("scoring with anomaly model version %d", model.version)
            self.model = model

    def load(self, device_id: str) -> Twin | None:
        data = self.twins.get(device_id.encode())
        return decode_twin(data) if data is not None else None

    async def handle_batch(
        self,
        records: list[InboxRecord],
        *,
        coalesce_reports: bool = False,
        commands_meanwhile: CommandsMeanwhile | None = None,
    ) -> None:
        """Decide on a batch, send its facts and, once the broker has them, write its twins.
        ``coalesce_reports``: fold each device's state reports into one first (coalescing.py: the
        telemetry lane is behind). ``commands_meanwhile``: asked every ``check_commands_s`` while the
        batch is decided; the command-lane records it returns are decided before the rest of the batch
        (what is decided so far is recorded first, so they see the twins it left)."""
        now = self.clock()
        loaded: dict[str, Twin | None] = {}  # each device's twin decoded once a batch, before any request
        touched: dict[str, Twin] = {}
        events: list[Event] = []
        commands: list[DeviceCommand] = []
        checked = time.monotonic()

        def stored(device_id: str) -> Twin | None:
            if device_id not in loaded:
                loaded[device_id] = self.load(device_id)
            return loaded[device_id]

        def last_seq(device_id: str) -> int:
            twin = stored(device_id)
            return twin.last_device_seq if twin is not None else -1

        for record, request in await self._decoded(records, last_seq if coalesce_reports else None):
            try:
                twin = touched.get(request.device_id) or stored(request.device_id)
                twin, new_events, new_commands = self._apply(twin, request, now)
            except Exception as error:  # a decision that fails drops this request only
                log.exception("could not decide on %s[%d]@%d", record.topic, record.partition, record.offset)
                await self.outbox.dead_letter(record, MalformedRecord("decide_failed", repr(error)))
                continue
            if twin is not None:
                touched[request.device_id] = twin
            events += new_events
            commands += new_commands
            if commands_meanwhile is not None and time.monotonic() - checked >= self.check_commands_s:
                if waiting := await commands_meanwhile():
                    await self._record(touched, events, commands)
                    await self.handle_batch(waiting)
                    # The rest of the batch starts afresh: those requests may have changed its twins.
                    now, loaded, touched, events, commands = self.clock(), {}, {}, [], []
                checked = time.monotonic()
        await self._record(touched, events, commands)
        self.processed += len(records)
        self.batches += 1

    async def _decoded(
        self, records: list[InboxRecord], last_seq: Callable[[str], int] | None
    ) -> list[tuple[InboxRecord, Inbound]]:
        """The batch's requests, each with its record; an unreadable one dead-lettered. With ``last_seq``
        (a device's twin's seq), each device's state reports coalesced into one (coalescing.py)."""
        decoded: list[tuple[InboxRecord, Inbound]] = []
        for record in records:
            try:
                decoded.append((record, decode_request(record.value)))
            except MalformedRecord as error:
                await self.outbox.dead_letter(record, error)
        if last_seq is not None:
            decoded, folded = coalesce(decoded, last_seq)
            if folded:
                self.coalesced.reports += folded
                self.coalesced.batches += 1
        return decoded

    def _apply(
        self, twin: Twin | None, request: Inbound, now: datetime
    ) -> tuple[Twin | None, list[Event], list[DeviceCommand]]:
        """The twin after ``request``, with the facts and device commands it led to (nothing changes
        outside until the caller takes them, so a request that fails halfway leaves no trace)."""
        out: list[Event] = []
        commands: list[DeviceCommand] = []
        changes = decide(twin, request, now)
        if not changes:
            if twin is None and not isinstance(request, RegisterDevice):
                self.unknown_device_requests += 1
            elif late_report(twin, request):
                self.late_reports += 1
            return twin, out, commands
        if (
            twin is not None
            and isinstance(request, ReportState)
            and any(c.event_type is StateReported for c in changes)
        ):
            changes += detect_anomalies(twin, request, self.model)
        home_id = twin.home_id if twin else getattr(request, "home_id", "")
        base = request.request_id.int
        ids = (uuid.UUID(int=base ^ i) for i in itertools.count())  # the first fact's id is the request's
        for event in stamp(
            twin,
            changes,
            home_id=home_id,
            device_id=request.device_id,
            now=now,
            causation_id=request.request_id,
            new_id=ids.__next__,
        ):
            twin = evolve(twin, event)
            out.append(event)
            if isinstance(event, CommandDispatched):
                commands.append(_device_command(twin, event))
        return twin, out, commands

    def due(self) -> list[bytes]:
        """The twins whose next deadline has passed (their keys in the table)."""
        at_most = self.clock().timestamp()
        return [key for key, at in self.deadlines.items() if at <= at_most]

    async def check_deadlines(self, lock: asyncio.Lock, chunk: int) -> int:
        """Every deadline passed (``tick``), ``chunk`` twins at a time, each chunk under ``lock`` (the one
        a batch of the inbox is handled under), so a batch waiting for it (a command's) goes between two
        chunks instead of after them all: when many devices fall silent at once (10,000 in `hearth bench
        mixed`, or a site's network gone), recording their facts no longer stalls every command (0.5-2 s
        in that bench, when one tick took them all). asyncio's lock is fair: released, it goes to
        the batch that waits for it before this takes it again. Returns how many twins were due."""
        due = self.due()
        for start in range(0, len(due), chunk):
            async with lock:
                await self.tick(due[start : start + chunk])
        return len(due)

    async def tick(self, keys: Sequence[bytes] | None = None) -> None:
        """Record the facts deadlines call for: expired commands, devices gone silent; of the twins
        ``keys`` names (default: every one due now) whose deadline is still passed (a batch between two
        chunks of ``check_deadlines`` may have moved it)."""
        now = self.clock()
        at_most = now.timestamp()
        touched: dict[str, Twin] = {}
        events: list[Event] = []
        commands: list[DeviceCommand] = []
        for key in self.due() if keys is None else keys:
            data = self.twins.get(key)
            if data is None:
                self.deadlines.pop(key, None)
                continue
            if self.deadlines.get(key, at_most + 1) > at_most:
                continue
            try:
                device_id, twin, new_events, new_commands = self._tick_one(key, data, now)
            except Exception:  # one twin's deadline must not stop every other's
                log.exception("could not check the deadlines of %r; dropped from the index", key[:80])
                self.deadlines.pop(key, None)
                continue
            touched[device_id] = twin
            events += new_events
            commands += new_commands
        await self._record(touched, events, commands)

    def catch_up(self, events: list[Event]) -> int:
        """Fold facts the journal has into the twins that do not have them yet (see adapters/catch_up.py).

        Only the next version of a twin is folded: a fact at or below it is known. A gap (a fact more
        than one version above the twin) means the twin is not the journal's, which a single writer per
        device never leaves: ``JournalGap`` is raised before any twin is written, and the worker stops
        rather than decide from it (a drill of 2026-11-28 journaled a stale twin's facts after a gap that
        was only logged). Returns how many twins moved on.
        """
        touched: dict[bytes, Twin | None] = {}
        changed: set[bytes] = set()
        for event in events:
            key = event.device_id.encode()
            if key in touched:
                twin = touched[key]
            else:
                data = self.twins.get(key)
                twin = touched[key] = decode_twin(data) if data is not None else None
            version = twin.version if twin is not None else 0
            if event.version <= version:
                continue
            if event.version != version + 1:
                raise JournalGap(
                    f"journal gap for {event.device_id}: twin at v{version}, next fact v{event.version}"
                )
            try:
                touched[key] = evolve(twin, event)
            except ValueError as error:  # a first fact that is not a registration
                log.error("catch-up cannot fold %s v%d: %s", event.device_id, event.version, error)
                continue
            changed.add(key)
        for key in changed:
            twin = touched[key]
            assert twin is not None
            self.twins[key] = encode_twin(twin)
            self._watch(key, twin)
        return len(changed)

    def _tick_one(
        self, key: bytes, data: bytes, now: datetime
    ) -> tuple[str, Twin, list[Event], list[DeviceCommand]]:
        twin, device_id = decode_twin(data), key.decode()
        changes = tick(twin, now, offline_after_s=self.offline_after.total_seconds())
        first = twin.version + 1
        ids = (uuid.uuid5(TICK_IDS, f"{device_id}:{version}") for version in itertools.count(first))
        events: list[Event] = []
        commands: list[DeviceCommand] = []
        for event in stamp(
            twin,
            changes,
            home_id=twin.home_id,
            device_id=device_id,
            now=now,
            causation_id=None,
            new_id=ids.__next__,
        ):
            twin = evolve(twin, event)
            events.append(event)
            if isinstance(event, CommandDispatched):
                commands.append(_device_command(twin, event))
        return device_id, twin, events, commands

    def rescan(self) -> None:
        """Rebuild the deadline index from every twin this worker holds (after a rebalance/recovery)."""
        self.deadlines = {}
        for key, data in list(self.twins.items()):
            self._watch(key, decode_twin(data))

    async def _record(
        self, touched: dict[str, Twin], events: list[Event], commands: list[DeviceCommand]
    ) -> None:
        if not events:
            return
        await self.outbox.send(events, commands)
        for device_id, twin in touched.items():
            key = device_id.encode()  # the first time, the table and the index share this object
            self.twins[key] = encode_twin(twin)
            self._watch(key, twin)

    def _watch(self, key: bytes, twin: Twin) -> None:
        candidates = [c.expires_at for c in twin.commands.values()]
        if twin.online and twin.last_seen is not None:
            candidates.append(twin.last_seen + self.offline_after)
        if candidates:
            self.deadlines[key] = min(candidates).timestamp()
        else:
            self.deadlines.pop(key, None)


def _device_command(twin: Twin, event: CommandDispatched) -> DeviceCommand:
    """What the device gets for a dispatched command (read from the twin right after the fact)."""
    command = twin.commands[str(event.payload.command_id)]
    return DeviceCommand(
        command_id=command.command_id,
        device_id=event.device_id,
        name=command.name,
        params=command.params,
        expires_at=command.expires_at,
        shard=twin.shard,
    )
