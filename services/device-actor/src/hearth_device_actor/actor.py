"""The device agents' loop, free of faust: decode a batch of inbox records, decide, record, evolve.

For every request the pure domain decides which facts to record; they get envelopes with the device's
next versions, are appended to the journal (acks=all) and folded into the twin. Each twin touched by a
batch is written back once, at the end of the batch (one changelog write per device per batch, not per
event). Dispatched commands go to the device-bound topic. Deadlines (command expiry, devices falling
silent) are checked by ``tick`` from an index, so a silent device still expires its commands.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import msgspec

from hearth_shared.domain import DEFAULT_MODEL, Twin, decide, detect_anomalies, evolve, stamp, tick
from hearth_shared.events import (
    AnomalyModel,
    CommandDispatched,
    DeviceCommand,
    Event,
    Inbound,
    MalformedRecord,
    ReportState,
    StateReported,
    decode_inbound,
    encode,
    utcnow,
)

log = logging.getLogger(__name__)

# Fact ids are derived, not random: a request processed twice (a worker restarted after recording its
# facts but before committing its inbox offsets) yields the very same facts, ids included, so every
# consumer can drop the second copy.
TICK_IDS = uuid.UUID("6c1f0e1e-8d0b-4f55-9a43-2f2d8f1c0b7a")

_encode_twin = msgspec.msgpack.Encoder().encode
_decode_twin = msgspec.msgpack.Decoder(Twin).decode


@dataclass(frozen=True, slots=True)
class InboxRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


class Outbox(Protocol):
    """Where the actor's output goes: the journal, the device-bound topic and the dead letters."""

    async def record(self, events: list[Event], commands: list[DeviceCommand]) -> None: ...

    async def dead_letter(self, record: InboxRecord, error: Exception) -> None: ...


class DeviceActors:
    def __init__(
        self,
        twins: MutableMapping[bytes, bytes],  # device_id (bytes, as the inbox key) -> Twin (msgpack)
        outbox: Outbox,
        *,
        offline_after_s: float,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.twins = twins
        self.outbox = outbox
        self.offline_after = timedelta(seconds=offline_after_s)
        self.clock = clock
        self.deadlines: dict[str, datetime] = {}
        self.processed = 0
        self.model: AnomalyModel = DEFAULT_MODEL  # replaced by each newer version the analytics publish

    def use_model(self, model: AnomalyModel) -> None:
        if model.version > self.model.version:
            log.info("scoring with anomaly model version %d", model.version)
            self.model = model

    def load(self, device_id: str) -> Twin | None:
        data = self.twins.get(device_id.encode())
        return _decode_twin(data) if data is not None else None

    async def handle_batch(self, records: list[InboxRecord]) -> None:
        now = self.clock()
        touched: dict[str, Twin | None] = {}
        events: list[Event] = []
        for record in records:
            try:
                request = decode_inbound(record.value)
            except MalformedRecord as error:
                await self.outbox.dead_letter(record, error)
                continue
            device_id = request.device_id
            twin = touched[device_id] if device_id in touched else self.load(device_id)
            touched[device_id] = self._apply(twin, request, now, events)
        await self._commit(touched, events)
        self.processed += len(records)

    def _apply(self, twin: Twin | None, request: Inbound, now: datetime, out: list[Event]) -> Twin | None:
        changes = decide(twin, request, now)
        if not changes:
            return twin
        if (
            twin is not None
            and isinstance(request, ReportState)
            and any(c.event_type is StateReported for c in changes)
        ):
            changes += detect_anomalies(twin, request, self.model)
        home_id = twin.home_id if twin else getattr(request, "home_id", "")
        ids = (uuid.uuid5(request.request_id, str(i)) for i in itertools.count())
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
        return twin

    async def tick(self) -> None:
        """Record the facts deadlines call for: expired commands, devices gone silent."""
        now = self.clock()
        due = [device_id for device_id, at in self.deadlines.items() if at <= now]
        touched: dict[str, Twin | None] = {}
        events: list[Event] = []
        for device_id in due:
            twin = self.load(device_id)
            if twin is None:
                self.deadlines.pop(device_id, None)
                continue
            changes = tick(twin, now, offline_after_s=self.offline_after.total_seconds())
            first = twin.version + 1
            ids = (uuid.uuid5(TICK_IDS, f"{device_id}:{version}") for version in itertools.count(first))
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
            touched[device_id] = twin
        await self._commit(touched, events)

    def rescan(self) -> None:
        """Rebuild the deadline index from every twin this worker holds (after a rebalance/recovery)."""
        self.deadlines = {}
        for key, data in list(self.twins.items()):
            self._watch(key.decode(), _decode_twin(data))

    async def _commit(self, touched: dict[str, Twin | None], events: list[Event]) -> None:
        if not events:
            return
        commands = [self._device_command(touched, e) for e in events if isinstance(e, CommandDispatched)]
        await self.outbox.record(events, commands)
        for device_id, twin in touched.items():
            if twin is not None:
                self.twins[device_id.encode()] = _encode_twin(twin)
                self._watch(device_id, twin)

    @staticmethod
    def _device_command(touched: dict[str, Twin | None], event: CommandDispatched) -> DeviceCommand:
        twin = touched[event.device_id]
        assert twin is not None
        command = twin.commands[str(event.payload.command_id)]
        return DeviceCommand(
            command_id=command.command_id,
            device_id=event.device_id,
            name=command.name,
            params=command.params,
            expires_at=command.expires_at,
        )

    def _watch(self, device_id: str, twin: Twin) -> None:
        candidates = [c.expires_at for c in twin.commands.values()]
        if twin.online and twin.last_seen is not None:
            candidates.append(twin.last_seen + self.offline_after)
        if candidates:
            self.deadlines[device_id] = min(candidates)
        else:
            self.deadlines.pop(device_id, None)


def encode_device_command(command: DeviceCommand) -> bytes:
    return encode(command)
