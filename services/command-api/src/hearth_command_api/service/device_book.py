"""The command API's device book: its small view of the journal, which devices exist (for auth and
existence checks) and where each command is in its lifecycle (for idempotent retries and ``?wait=``).
Not ``hearth_shared.domain.registry`` (the device types): this one is a fold of facts.

It is a fold of the journal, fed by a ``TopicFollower`` (wired in ``app.make_app``); queries never touch
Kafka. A record it cannot read or use (undecodable, a tombstone, a fact ``hearth_shared.domain.storable`` says
cannot be stored, or one whose application raises) is logged with its reason and skipped: the view
follows the journal past it (the read-model projector dead-letters it).

Invariants:

* **It restarts from a snapshot.** ``snapshot()`` / ``restore()`` save and restore the devices and the
  commands as a versioned msgpack struct (``DeviceBookSnapshotV1``) that this module owns and keeps
  readable: with a retention window set, a snapshot may be all that is left of a device's registration.
  Every command-API process folds the same journal alike, so they share one snapshot name. The ``?wait=``
  waiters are not state: they are never saved, and a restore happens before the API serves.
* **Memory is bounded by live state, not history.** A command leaves the view once ``window_s`` has
  passed since it finished, by the ``recorded_at`` of its terminal fact (so a replay from the first
  offset prunes exactly alike), checked against the clock after each poll of the journal through a heap
  of (leaves at, command id): a peek when nothing is due, never a scan of every command. A command that
  never finishes (its request dropped) leaves ``window_s`` after its deadline, as a safety net.
* **An Idempotency-Key names one command per window.** The command id is derived from the device, the
  key and the window's generation (``floor(now / window_s)``). A retry looks for the key's command in
  this generation and the ones before it that a command may still live in (``lookback``); one that
  finished ``window_s`` ago or longer no longer counts, and the retry is a new command with this
  generation's id. That id differs from every earlier one of the key, so the device actor, which drops
  a request whose command id it has seen (``Twin.finished``, the last few), runs it.
* **A status comes with the twin version it was reached at.** ``CommandEntry.twin_version`` is the
  ``version`` of the fact that put the command in its status (``command.requested`` for ``pending``),
  or of the fact that set what it asked (``device.desired_set``, ``SETTING_FACTS``) when that came
  after it in the same decision (``accepted``): the device's twin at that version is the one the status
  describes (for ``accepted``, ``desired`` holds what was asked; for ``converged``, the report that
  converged it is in it). The answers carry it, so a caller can read the query API's views with
  ``?min_version=`` at least that; it is None only while the command's first fact has not come back (a
  fresh 202). It is set with the status in one step, never between: an answer's pair is consistent.
* **A device's MQTT shard is the journal's** (``device.registered``, then ``device.shard_moved``): the
  credentials answered name its shard's broker. ``wait_credentials_loaded`` lets an answer wait until
  that broker has loaded a credential (``device.credentials_loaded``, which its broker-access follower
  asks for); like ``?wait=``, the waiters are not state, and nor is which credential was loaded.
* The routes remember a device or command they just put on the inbox (``remember_device``,
  ``remember_command``) before its fact comes back; only after the request is on the broker, so the
  journal will hold the fact: a snapshot may hold one a moment early, never one the journal will not.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import json
import logging
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from hearth_shared.domain.admin import ADMIN_SETTINGS
from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.events import (
    COMMAND_STATUS_BY_EVENT,
    TERMINAL_STATUSES,
    CommandRequested,
    DesiredStateSet,
    DeviceCredentialsLoaded,
    DeviceRegistered,
    DeviceShardMoved,
    Event,
    MalformedRecord,
    fact_type,
    status_reached,
    utcnow,
    wire_name,
)
from hearth_shared.schema.shards import DEFAULT_SHARD
from hearth_shared.schema.snapshot_format import SnapshotCodec

log = logging.getLogger(__name__)

DEFAULT_WINDOW_S = 24 * 3600.0

# The facts that set what a command asked for: they follow its ``command.accepted`` in the same decision.
SETTING_FACTS: tuple[type[Event], ...] = (DesiredStateSet, *ADMIN_SETTINGS.values())

# Idempotency keys name commands: the same key for the same device in the same generation always gives
# the same command id, so even two API processes racing on one retry put one command into the journal
# (the actor drops the second request for a command id it already has).
IDEMPOTENCY_NAMESPACE = uuid.UUID("3f7d9a52-52f4-4a8e-8c1e-6f1f6f0b1e11")


def fingerprint(name: str, params: dict[str, Any]) -> bytes:
    """What makes two command bodies "the same" for an Idempotency-Key retry."""
    canonical = json.dumps([name, params], sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(canonical.encode(), digest_size=12).digest()


def keyed_command_id(device_id: str, key: str, generation: int) -> uuid.UUID:
    """The command an Idempotency-Key names for a device in one generation of the window."""
    return uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{device_id}\n{key}\n{generation}")


def unversioned_command_id(device_id: str, key: str) -> uuid.UUID:
    """The id a key named before ids had generations: still found while such a command is in its
    window, so a retry across the upgrade is not a second command (dead once a window has passed)."""
    return uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{device_id}\n{key}")


@dataclass(slots=True)
class DeviceEntry:
    home_id: str
    device_type: str
    simulated: bool = False
    shard: str = DEFAULT_SHARD  # its MQTT broker shard
    loaded_credential: uuid.UUID | None = None  # the latest its shard's broker loaded (not saved)


@dataclass(slots=True)
class CommandEntry:
    device_id: str
    fingerprint: bytes
    expires_at: datetime  # its deadline: the actor ends it by then (the safety net's clock)
    status: str = "pending"
    finished_at: datetime | None = None  # ``recorded_at`` of its terminal fact
    twin_version: int | None = None  # the version of the fact that put it in ``status``
    # The ``?wait=`` answers under way: the status each waits for, and the future that wakes it. Only a
    # fact that reaches a waiter's status wakes it (once), not every step of the command's lifecycle.
    waiters: list[tuple[str, asyncio.Future[None]]] = field(default_factory=list)

    def leaves_at(self, window_s: float) -> float:
        """When (epoch seconds) it leaves the view: ``window_s`` after it finished, or after its deadline
        while it has not."""
        return (self.finished_at or self.expires_at).timestamp() + window_s


# ------------------------------------------------------------------------------------ snapshot format
# Format 1. Records are msgpack arrays (``array_like``): a later format may only append fields with
# defaults to them, or bump ``format`` and keep a reader for this one
# (``hearth_shared.schema.snapshot_format``). ``CommandRecord.twin_version`` was appended so (a snapshot
# saved before it reads as None: unknown until the command's next fact), and ``DeviceRecord.shard`` (a
# snapshot saved before shards: every device on the one broker there was).

SNAPSHOT_FORMAT = 1


class DeviceRecord(msgspec.Struct, array_like=True, frozen=True):
    device_id: str
    home_id: str
    device_type: str
    simulated: bool
    shard: str = DEFAULT_SHARD


class CommandRecord(msgspec.Struct, array_like=True, frozen=True):
    command_id: uuid.UUID
    device_id: str
    fingerprint: bytes
    status: str
    expires_at: datetime
    finished_at: datetime | None
    twin_version: int | None = None


class DeviceBookSnapshotV1(msgspec.Struct, kw_only=True):
    format: int
    devices: list[DeviceRecord]
    commands: list[CommandRecord]


_CODEC = SnapshotCodec("device book", DeviceBookSnapshotV1, SNAPSHOT_FORMAT)


class DeviceBook:
    """Devices and command statuses, applied fact by fact. Pure in-memory; fed by a ``TopicFollower``
    (``on_journal_record``, ``after_poll``) and saved by its snapshots (``snapshot``, ``restore``)."""

    # The facts that change the view; the rest (telemetry, mostly) is skipped without being decoded.
    FACT_TYPES = frozenset(
        [
            wire_name(DeviceRegistered),
            wire_name(DeviceShardMoved),
            wire_name(DeviceCredentialsLoaded),
            *map(wire_name, COMMAND_STATUS_BY_EVENT),
            *map(wire_name, SETTING_FACTS),
        ]
    )

    def __init__(
        self,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        longest_deadline_s: float = DEFAULT_WINDOW_S,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self.window_s = window_s
        self.clock = clock
        # Generations back a retry looks for its command: a command lives at most its deadline, then
        # counts for the window; one more for an actor that ends it a little late.
        self.lookback = math.ceil(longest_deadline_s / window_s) + 2
        self.devices: dict[str, DeviceEntry] = {}
        self.commands: dict[uuid.UUID, CommandEntry] = {}
        self._leaving: list[tuple[float, uuid.UUID]] = []  # heap: (leaves_at, command id)
        self._loading: dict[uuid.UUID, list[asyncio.Future[None]]] = {}  # credential id -> its waiters
        self.skipped = 0  # records it could not decode

    # ------------------------------------------------------------------------------------ the fold

    async def on_journal_record(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        """One journal record into the view (the follower's ``on_record``): facts of other types are
        skipped by their type alone, undecoded; one it cannot decode is logged and skipped."""
        if fact_type(value) not in self.FACT_TYPES:
            return
        try:
            event = decode_fact(value)
        except MalformedRecord as error:
            self.skipped += 1
            log.warning("book view skips %s[%d]@%d: %s", topic, partition, offset, error)
            return
        self.apply(event)

    async def after_poll(self) -> None:
        """After each poll of the journal: commands whose window passed leave."""
        self.prune()

    def apply(self, event: Event) -> None:
        if isinstance(event, DeviceRegistered):
            payload = event.payload
            self.devices[event.device_id] = DeviceEntry(
                event.home_id, payload.device_type, payload.simulated, payload.shard
            )
            return
        if isinstance(event, DeviceShardMoved | DeviceCredentialsLoaded):
            self._device_fact(event)
            return
        if isinstance(event, SETTING_FACTS):
            self._setting_set(event)
            return
        status = COMMAND_STATUS_BY_EVENT.get(type(event))
        if status is None:
            return
        if isinstance(event, CommandRequested):
            p = event.payload
            requested = self.remember_command(
                p.command_id, event.device_id, fingerprint(p.name, p.params), p.expires_at
            )
            if requested.twin_version is None:  # (a command past pending already has its later version)
                requested.twin_version = event.version
            return
        command_id = event.correlation_id
        entry = self.commands.get(command_id) if command_id is not None else None
        if command_id is None or entry is None or status_reached(entry.status, status):
            return  # unknown (left the view, or before a retention window), or a step it is past
        entry.status, entry.twin_version = status, event.version
        if status in TERMINAL_STATUSES:
            entry.finished_at = event.recorded_at
            heapq.heappush(self._leaving, (entry.leaves_at(self.window_s), command_id))
        if entry.waiters:
            entry.waiters = [waiter for waiter in entry.waiters if not _woken(waiter, status)]

    def _device_fact(self, event: DeviceShardMoved | DeviceCredentialsLoaded) -> None:
        """A move changes where the device connects; a loaded credential wakes whoever waits for it."""
        device = self.devices.get(event.device_id)
        if isinstance(event, DeviceShardMoved):
            if device is not None:
                device.shard, device.loaded_credential = event.payload.shard, None
            return
        credential_id = event.payload.credential_id
        if device is not None:
            device.loaded_credential = credential_id
        for waiter in self._loading.pop(credential_id, []):
            _wake(waiter)

    def _setting_set(self, event: Event) -> None:
        """The setting an accepted command asked for is in the twin from this fact on: its status's twin
        version moves here, so a read at that version shows what was asked (``desired``)."""
        entry = self.commands.get(event.correlation_id) if event.correlation_id is not None else None
        if entry is not None and entry.twin_version is not None and entry.twin_version < event.version:
            entry.twin_version = event.version

    def prune(self) -> int:
        """Drop the commands whose time in the view is up; returns how many left. A peek at the heap
        when none is due."""
        now = self.clock().timestamp()
        leaving, dropped = self._leaving, 0
        while leaving and leaving[0][0] <= now:
            _, command_id = heapq.heappop(leaving)
            entry = self.commands.get(command_id)
            # (an entry pushed at its deadline that finished later has a later push of its own)
            if entry is not None and entry.leaves_at(self.window_s) <= now:
                del self.commands[command_id]
                dropped += 1
        return dropped

    def remember_device(
        self,
        device_id: str,
        home_id: str,
        device_type: str,
        simulated: bool = False,
        shard: str = DEFAULT_SHARD,
    ) -> None:
        self.devices.setdefault(device_id, DeviceEntry(home_id, device_type, simulated, shard))

    def remember_command(
        self, command_id: uuid.UUID, device_id: str, print_: bytes, expires_at: datetime
    ) -> CommandEntry:
        entry = self.commands.get(command_id)
        if entry is None:
            entry = self.commands[command_id] = CommandEntry(device_id, print_, expires_at)
            heapq.heappush(self._leaving, (entry.leaves_at(self.window_s), command_id))
        return entry

    # ------------------------------------------------------------------------------------ queries

    def generation(self, now: datetime) -> int:
        return math.floor(now.timestamp() / self.window_s)

    def in_window(self, entry: CommandEntry, now: datetime) -> bool:
        """Does the command still answer its key and ``?wait=``: unfinished, or finished less than the
        window ago? (Whether ``prune`` has dropped it yet does not matter: the answer is the clock's.)"""
        return now.timestamp() < entry.leaves_at(self.window_s)

    def keyed_command(self, device_id: str, key: str, now: datetime) -> tuple[uuid.UUID, CommandEntry | None]:
        """The command ``key`` names for ``device_id`` at ``now``: (its id, its entry) when one of the
        key's commands is in its window, else (this generation's id, None) for a new one."""
        generation = self.generation(now)
        current = keyed_command_id(device_id, key, generation)
        entry = self.commands.get(current)
        if entry is not None:  # this generation's: in its window (else a clock went back)
            return current, entry
        older = (keyed_command_id(device_id, key, generation - back) for back in range(1, self.lookback + 1))
        for command_id in (*older, unversioned_command_id(device_id, key)):
            entry = self.commands.get(command_id)
            if entry is not None and self.in_window(entry, now):
                return command_id, entry
        return current, None

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

    async def wait_credentials_loaded(
        self, device_id: str, credential_id: uuid.UUID, timeout_s: float
    ) -> bool:
        """Wait until the device's shard's broker has loaded ``credential_id`` (True), or ``timeout_s``."""
        device = self.devices.get(device_id)
        if device is not None and device.loaded_credential == credential_id:
            return True
        if timeout_s <= 0:
            return False
        loaded: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._loading.setdefault(credential_id, []).append(loaded)
        try:
            await asyncio.wait_for(loaded, timeout_s)
        except TimeoutError:
            return False
        finally:
            waiters = self._loading.get(credential_id, [])
            if loaded in waiters:
                waiters.remove(loaded)
                if not waiters:
                    del self._loading[credential_id]
        return True

    # ------------------------------------------------------------------------------------ snapshots

    def snapshot(self) -> bytes:
        """The devices and commands (not the waiters) in snapshot format 1."""
        return _CODEC.encode(
            DeviceBookSnapshotV1(
                format=SNAPSHOT_FORMAT,
                devices=[
                    DeviceRecord(device_id, d.home_id, d.device_type, d.simulated, d.shard)
                    for device_id, d in self.devices.items()
                ],
                commands=[
                    CommandRecord(
                        command_id,
                        c.device_id,
                        c.fingerprint,
                        c.status,
                        c.expires_at,
                        c.finished_at,
                        c.twin_version,
                    )
                    for command_id, c in self.commands.items()
                ],
            )
        )

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a snapshot's; raises, leaving the state as it was, for bytes it
        cannot read."""
        saved = _CODEC.decode(data)
        devices = {
            d.device_id: DeviceEntry(d.home_id, d.device_type, d.simulated, d.shard) for d in saved.devices
        }
        commands = {
            c.command_id: CommandEntry(
                c.device_id, c.fingerprint, c.expires_at, c.status, c.finished_at, c.twin_version
            )
            for c in saved.commands
        }
        leaving = [(entry.leaves_at(self.window_s), command_id) for command_id, entry in commands.items()]
        heapq.heapify(leaving)
        self.devices, self.commands, self._leaving = devices, commands, leaving


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
