"""The command API's small view of the journal: which devices exist (for auth and existence checks)
and where each command is in its lifecycle (for idempotent retries and ``?wait=``).

It is kept current by consuming the journal in the background; queries never touch Kafka. A record it
cannot read or use (undecodable, a tombstone, a fact ``hearth_shared.storable`` says cannot be stored,
or one whose application raises) is logged with its reason and skipped: the view follows the journal
past it (the read-model projector dead-letters it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer

from hearth_shared.events import (
    COMMAND_STATUS_BY_EVENT,
    CommandRequested,
    DeviceRegistered,
    Event,
    MalformedRecord,
    fact_type,
    status_reached,
    wire_name,
)
from hearth_shared.kafka import topic_partitions
from hearth_shared.storable import decode_fact

log = logging.getLogger(__name__)


def fingerprint(name: str, params: dict[str, Any]) -> bytes:
    """What makes two command bodies "the same" for an Idempotency-Key retry."""
    canonical = json.dumps([name, params], sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(canonical.encode(), digest_size=12).digest()


@dataclass(slots=True)
class DeviceEntry:
    home_id: str
    device_type: str
    simulated: bool = False


@dataclass(slots=True)
class CommandEntry:
    device_id: str
    fingerprint: bytes
    status: str = "pending"
    # The ``?wait=`` answers under way: the status each waits for, and the future that wakes it. Only a
    # fact that reaches a waiter's status wakes it (once), not every step of the command's lifecycle.
    waiters: list[tuple[str, asyncio.Future[None]]] = field(default_factory=list)


class RegistryView:
    """Devices and command statuses, applied fact by fact. Pure in-memory; fed by ``JournalFeed``."""

    # The facts that change the view; the rest (telemetry, mostly) is skipped without being decoded.
    FACT_TYPES = frozenset([wire_name(DeviceRegistered), *map(wire_name, COMMAND_STATUS_BY_EVENT)])

    def __init__(self) -> None:
        self.devices: dict[str, DeviceEntry] = {}
        self.commands: dict[uuid.UUID, CommandEntry] = {}

    def apply(self, event: Event) -> None:
        if isinstance(event, DeviceRegistered):
            payload = event.payload
            self.devices[event.device_id] = DeviceEntry(event.home_id, payload.device_type, payload.simulated)
            return
        status = COMMAND_STATUS_BY_EVENT.get(type(event))
        if status is None:
            return
        if isinstance(event, CommandRequested):
            p = event.payload
            self.remember_command(p.command_id, event.device_id, fingerprint(p.name, p.params))
            return
        entry = self.commands.get(event.correlation_id) if event.correlation_id else None
        if entry is not None and not status_reached(entry.status, status):
            entry.status = status
            if entry.waiters:
                entry.waiters = [waiter for waiter in entry.waiters if not _woken(waiter, status)]

    def remember_device(
        self, device_id: str, home_id: str, device_type: str, simulated: bool = False
    ) -> None:
        self.devices.setdefault(device_id, DeviceEntry(home_id, device_type, simulated))

    def remember_command(self, command_id: uuid.UUID, device_id: str, print_: bytes) -> CommandEntry:
        return self.commands.setdefault(command_id, CommandEntry(device_id, print_))

    async def wait_for(self, command_id: uuid.UUID, wanted: str, timeout_s: float) -> tuple[str, bool]:
        """Wait until the command reaches ``wanted`` (or ends); returns (status, timed_out)."""
        entry = self.commands[command_id]
        if status_reached(entry.status, wanted):
            return entry.status, False
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        waiter = (wanted, woken)
        entry.waiters.append(waiter)
        timer = loop.call_later(timeout_s, _wake, woken)  # one timer, not a wait_for per status change
        try:
            await woken
        finally:
            timer.cancel()
            if waiter in entry.waiters:  # (``apply`` dropped it if it woke it)
                entry.waiters.remove(waiter)
        return entry.status, not status_reached(entry.status, wanted)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _woken(waiter: tuple[str, asyncio.Future[None]], status: str) -> bool:
    """Wake ``waiter`` if ``status`` is (or is past) the one it waits for; returns whether it did."""
    wanted, future = waiter
    if not status_reached(status, wanted):
        return False
    _wake(future)
    return True


class JournalFeed:
    """Reads the whole journal from its first offset, then follows it, applying facts to a view.

    ``caught_up`` is set once every partition was read up to the end offsets seen at start-up.
    Records that cannot be decoded are skipped here (the read-model projector dead-letters them).
    """

    def __init__(self, bootstrap_servers: str, topic: str, view: RegistryView) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.view = view
        self.caught_up = asyncio.Event()
        self.skipped = 0  # facts it could not use
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await self.consumer.start()
        tps = await topic_partitions(self.consumer, self.topic)
        self.consumer.assign(tps)
        await self.consumer.seek_to_beginning(*tps)
        self._end = {tp: off for tp, off in (await self.consumer.end_offsets(tps)).items() if off > 0}
        if not self._end:
            self.caught_up.set()
        self._task = asyncio.create_task(self._run(), name="journal-feed")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()

    def _apply(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        """One fact into the view; one it cannot use is logged and skipped, never the end of the feed."""
        try:
            self.view.apply(decode_fact(value))
        except MalformedRecord as error:
            self.skipped += 1
            log.warning("registry view skips %s[%d]@%d: %s", topic, partition, offset, error)
        except Exception:
            self.skipped += 1
            log.exception("registry view skips %s[%d]@%d", topic, partition, offset)

    async def _run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=200, max_records=5000)
            for tp, records in batches.items():
                for record in records:
                    if fact_type(record.value) in self.view.FACT_TYPES:
                        self._apply(record.topic, record.partition, record.offset, record.value)
                if (
                    not self.caught_up.is_set()
                    and tp in self._end
                    and records[-1].offset + 1 >= self._end[tp]
                ):
                    del self._end[tp]
                    if not self._end:
                        log.info("registry view caught up with the journal")
                        self.caught_up.set()
