"""The simulated hub: plays every simulated device of a type it has a model for (models.py) over MQTT, as
a customer's hub would.

``Fleet`` learns its devices from the journal (``device.registered`` facts with ``simulated`` of a type it
has a model for, read from the first offset and then followed, so a device registered later is picked up
live). It is a hub of the device SDK (``hearth_device.DeviceConnection(hub=True)``): one MQTT connection
with the simulator's credential, which the broker lets act only for simulated devices, and only once the
broker has loaded the ACL lines of a device registered a moment ago: the hub acts for a device (and
publishes its reports) only after the retained ``allowed`` on ``hearth/hubs/{hub}/devices/{device}``
(``hearth_shared.mqtt.hub_child_topic``), since the broker drops a connection that publishes what its ACL
denies. It receives each
device's commands on its ``commands`` topic, applies and acks them, and publishes the devices' reports
and acks to their ``state`` and ``acks`` topics; the device gateway takes them to the inbox. Nothing here
writes Kafka. Publishes are never awaited one by one (the SDK keeps up to the broker's receive maximum
in flight), and one loop serves all devices: a heap of wake-up times, so a tick touches only the devices
that have something to say.

``FleetOptions`` make it a poor network on purpose: devices going silent for a while, slow or lost acks,
reports sent twice, two consecutive reports swapped (with their seqs: the actor must drop the older),
and the faults of each type's model (thermostats whose reading drifts, locks that jam...: each model's
``for_fleet`` reads its own from the options, ``fault_rates`` for those without a field here).

The core (``learn``, ``on_command``, ``tick``) is synchronous and returns the MQTT messages to publish
(topic, payload), so it runs without a broker; ``run`` wires it to the journal (read only) and MQTT.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import math
import random
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer

from hearth.simulator import firmware
from hearth.simulator.devices.sim_thermostat import SimThermostat
from hearth.simulator.firmware import DeviceFirmware, FirmwareOptions
from hearth.simulator.models import SIM_MODELS, SimDevice
from hearth_device import Command, DeviceConnection
from hearth_shared.events import (
    DeviceRegistered,
    Event,
    MalformedRecord,
    StateReported,
    wire_name,
)
from hearth_shared.kafka import topic_partitions
from hearth_shared.mqtt import (
    PLATFORM_PORT,
    AckMessage,
    StateMessage,
    acks_topic,
    encode_message,
    hub_child_topic,
    state_topic,
)
from hearth_shared.storable import decode_fact
from hearth_shared.topics import Topics

log = logging.getLogger(__name__)

Record = tuple[str, bytes]  # (MQTT topic, payload) to publish

# Only these journal facts are decoded; a cheap substring test skips every other record.
_REGISTERED = wire_name(DeviceRegistered).encode()
_REPORTED = wire_name(StateReported).encode()

MIN_TICK_S = 0.01  # the loop sleeps at least this long between ticks (unless a command arrives)
MAX_TICK_S = 0.5
STATS_EVERY_S = 30.0


@dataclass(frozen=True)
class FleetOptions:
    rate: float = 1.0  # telemetry reports per second per device
    offline_fraction: float = 0.0  # about this share of devices is silent at any time
    offline_s: tuple[float, float] = (90.0, 300.0)  # how long a silence lasts (the actor notices after 60 s)
    ack_delay_s: float = 0.0
    lost_ack_fraction: float = 0.0
    duplicate_fraction: float = 0.0  # reports sent twice
    reorder_fraction: float = 0.0  # reports held back and sent after the next one
    drifting_ids: frozenset[str] = frozenset()  # thermostats whose reading drifts
    drifting_fraction: float = 0.0  # ... or this share of all thermostats
    drift_c_per_h: float | None = None  # how fast a drifting reading drifts (signed); None: ±1-3 °C/h, drawn
    jam_probability: float = 0.0  # per lock move
    fault_rates: Mapping[str, float] = field(default_factory=dict)  # by name, as a model documents them
    seed: int = 0
    client_id: str = "hearth-simulator"  # the journal reader's Kafka client id
    firmware: FirmwareOptions = field(
        default_factory=FirmwareOptions
    )  # installs, reboots and their failure modes (firmware.py)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError("rate must be positive")
        if not 0 <= self.offline_fraction < 1:
            raise ValueError("offline_fraction must be in [0, 1)")


@dataclass(eq=False, slots=True)
class _Player:
    """One simulated device, and what the gateway keeps about it."""

    device_id: str
    state_topic: str
    model: SimDevice
    seq: int  # the last device_seq sent
    last_step: float
    wake_at: float = 0.0  # its live entry in the heap (older entries are stale)
    silent_until: float = 0.0
    held: bytes | None = None  # a report held back, to be sent after the next one
    firmware: DeviceFirmware = field(default_factory=lambda: DeviceFirmware(""))  # set in add_device


@dataclass(frozen=True)
class MqttEndpoint:
    """Where the hub connects, and as whom (the local stack's simulator account)."""

    host: str = "127.0.0.1"
    port: int = PLATFORM_PORT  # the service accounts' listener
    username: str = "_hearth_simulator"
    password: str = ""


class Fleet:
    """The hub: every simulated device, the faults it plays, and the wiring (``run``)."""

    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        options: FleetOptions,
        *,
        mqtt: MqttEndpoint | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.mqtt = mqtt or MqttEndpoint()
        self.options = options
        self.clock = clock
        self.rng = random.Random(options.seed)
        self.players: dict[str, _Player] = {}
        self.stats: Counter[str] = Counter()
        self._heap: list[tuple[float, int, _Player]] = []
        self._order = itertools.count()  # heap tie-breaker
        self._acks: deque[tuple[float, str, bytes]] = deque()  # (due, topic, payload), in due order
        self._poke = asyncio.Event()  # a command arrived or a device was added: tick now
        self.allowed: set[str] = set()  # devices the broker lets the hub act for (``run`` only)
        self._hub: DeviceConnection | None = None
        silent_s = sum(options.offline_s) / 2
        f = options.offline_fraction
        self._silence_per_s = f / ((1 - f) * silent_s)  # so that about f of the time is spent silent

    # ------------------------------------------------------------------------------------- the core

    def add_device(self, device_id: str, device_type: str, now: float) -> bool:
        """Start playing a device; False for a type without a model, or a device already played."""
        if device_type not in SIM_MODELS or device_id in self.players:
            return False
        model = self._new_model(device_id, device_type, now)
        # device_seq survives gateway restarts: it starts from the clock (ms), and only ever grows.
        player = _Player(device_id, state_topic(device_id), model, seq=int(now * 1000), last_step=now)
        player.firmware = DeviceFirmware(self.options.firmware.initial_version)
        player.model.firmware_version = player.firmware.version
        self.players[device_id] = player
        self._schedule(player, model.wake_at)
        self._poke.set()
        return True

    def learn(self, event: Event, now: float) -> None:
        """Take in a journal fact: a simulated device's registration adds it, a state report restores what
        it said."""
        if isinstance(event, DeviceRegistered) and event.payload.simulated:
            self.add_device(event.device_id, event.payload.device_type, now)
        elif isinstance(event, StateReported) and (player := self.players.get(event.device_id)):
            player.model.restore(event.payload.reported)
            player.firmware.restore(event.payload.reported)
            player.seq = max(player.seq, event.payload.device_seq)

    def on_command(self, command: Command, now: float) -> None:
        """A command reaches its device: apply it and queue the ack (maybe late, maybe never)."""
        player = self.players.get(command.device_id)
        if player is None or player.silent_until > now:
            self.stats["commands_unheard"] += 1  # not ours, or out of reach: the actor will expire it
            return
        if command.expires_at.timestamp() <= now:
            self.stats["commands_stale"] += 1
            return
        if firmware.handles(command.name):
            ok, reason = self._admin_command(player, command, now)
        else:
            ok, reason = player.model.apply_command(command.name, command.params, now)
        self._schedule(player, now)  # report the change right away
        self.stats["commands_ok" if ok else "commands_failed"] += 1
        options = self.options
        if options.lost_ack_fraction and self.rng.random() < options.lost_ack_fraction:
            self.stats["acks_lost"] += 1
            return
        due = now + options.ack_delay_s
        ack = AckMessage(command_id=command.command_id, result="ok" if ok else "failed", reason=reason)
        self._acks.append((due, acks_topic(player.device_id), encode_message(ack)))
        self._poke.set()

    def _admin_command(self, player: _Player, command: Command, now: float) -> tuple[bool, str]:
        """``reboot`` / ``update_firmware``: the ack, then silence while it installs (firmware.py)."""
        outcome = firmware.command(self.options.firmware, command.name, command.params)
        was_drifting = player.firmware.drifting
        firmware.apply(player.firmware, outcome)
        player.model.firmware_version = player.firmware.version  # its telemetry says what it now runs
        if isinstance(player.model, SimThermostat) and player.firmware.drifting != was_drifting:
            drift = self.options.firmware.drift_c_per_h if outcome.drifts else 0.0
            player.model.drift_c_per_s = drift / 3600.0
        if outcome.silent_s:
            player.silent_until = now + outcome.silent_s
            player.held = None
        self.stats[f"firmware_{'ok' if outcome.ok else outcome.reason}"] += 1
        return outcome.ok, outcome.reason

    def tick(self, now: float) -> list[Record]:
        """Everything due by ``now``: acks, then every due device's report."""
        out: list[Record] = []
        acks = self._acks
        while acks and acks[0][0] <= now:
            _, topic, payload = acks.popleft()
            out.append((topic, payload))
        self.stats["acks"] += len(out)
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _, player = heapq.heappop(heap)
            if at != player.wake_at:
                continue  # rescheduled since
            self._play(player, now, out)
            back = player.silent_until if player.silent_until > now else player.model.wake_at
            self._schedule(player, max(back, now + MIN_TICK_S))
        return out

    def next_wake_at(self) -> float:
        due = [self._acks[0][0]] if self._acks else []
        if self._heap:
            due.append(self._heap[0][0])
        return min(due, default=math.inf)

    def _play(self, player: _Player, now: float, out: list[Record]) -> None:
        options, rng = self.options, self.rng
        if player.silent_until > now:  # out of reach; back, it says what changed meanwhile (a firmware)
            return
        elapsed = now - max(player.last_step, player.silent_until)  # time heard since the last play
        player.last_step = now
        report = player.model.step(now)  # integrates the time it was silent too
        if self._silence_per_s and rng.random() < 1.0 - math.exp(-self._silence_per_s * elapsed):
            player.silent_until = now + rng.uniform(*options.offline_s)
            player.held = None
            self.stats["silences"] += 1
            return
        if report is None:
            return
        player.seq += 1
        value = encode_message(StateMessage(seq=player.seq, at=_datetime(now), state=report))
        self.stats["reports"] += 1
        if player.held is not None:
            out.append((player.state_topic, value))
            out.append((player.state_topic, player.held))  # the older one second: the actor must drop it
            player.held = None
            return
        if options.reorder_fraction and rng.random() < options.reorder_fraction:
            player.held = value
            self.stats["reordered"] += 1
            return
        out.append((player.state_topic, value))
        if options.duplicate_fraction and rng.random() < options.duplicate_fraction:
            out.append((player.state_topic, value))
            self.stats["duplicated"] += 1

    def _schedule(self, player: _Player, at: float) -> None:
        player.wake_at = at
        heapq.heappush(self._heap, (at, next(self._order), player))

    def _new_model(self, device_id: str, device_type: str, now: float) -> SimDevice:
        """A model for the device, its character drawn from a generator seeded by the device id."""
        rng = random.Random(f"{self.options.seed}/{device_id}")
        return SIM_MODELS[device_type].for_fleet(self.options, device_id, rng, now)

    # ------------------------------------------------------------------------------------ the wiring

    async def run(self, stop: asyncio.Event) -> None:
        """Play the fleet until ``stop`` is set: catch up on the journal, then follow it and play.

        The topics must exist (the stack creates them, as for every service)."""
        journal = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            client_id=f"{self.options.client_id}-journal",
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )
        mqtt = self.mqtt
        hub = DeviceConnection(
            username=mqtt.username, password=mqtt.password, host=mqtt.host, port=mqtt.port, hub=True
        )
        self._hub = hub
        hub.link.subscribe(hub_child_topic(mqtt.username, "+"), self._on_allowed)
        await journal.start()
        try:
            await self._catch_up(journal)
            await hub.connect()
            self._join(hub)
            log.info(
                "simulator: playing %d devices at %g reports/s each", len(self.players), self.options.rate
            )
            async with asyncio.TaskGroup() as tasks:
                running = [
                    tasks.create_task(self._follow_journal(journal, hub)),
                    tasks.create_task(self._take_commands(hub)),
                    tasks.create_task(self._play_loop(hub)),
                    tasks.create_task(self._log_stats()),
                ]
                await stop.wait()
                for task in running:
                    task.cancel()
        finally:
            await hub.close()  # the hub says offline (as its will would): Hearth takes its children offline
            await journal.stop()

    def _join(self, hub: DeviceConnection) -> None:
        """Act for every device played, allowed and not yet known to the hub (subscribes to its commands)."""
        for device_id in (self.players.keys() & self.allowed) - set(hub.devices):
            hub.add_device(device_id)

    async def _on_allowed(self, topic: str, _payload: bytes) -> None:
        """The broker lets the hub act for a device now (a retained message, again on every connect)."""
        device_id = topic.rsplit("/", 1)[-1]
        self.allowed.add(device_id)
        if device_id in self.players and self._hub is not None:
            self._hub.add_device(device_id)  # a no-op for a device it acts for already

    async def _catch_up(self, journal: AIOKafkaConsumer) -> None:
        """Read the journal from the start to its current end: every device, and what it last said."""
        assigned = await topic_partitions(journal, self.topics.journal)
        journal.assign(assigned)
        await journal.seek_to_beginning(*assigned)
        end = await journal.end_offsets(assigned)
        behind = [tp for tp in assigned if end[tp] > 0]
        while behind:
            batches = await journal.getmany(timeout_ms=500, max_records=20_000)
            now = self.clock()
            for records in batches.values():
                for record in records:
                    self._read_fact(record.value, now, catching_up=True)
            behind = [tp for tp in behind if await journal.position(tp) < end[tp]]

    async def _follow_journal(self, journal: AIOKafkaConsumer, hub: DeviceConnection) -> None:
        while True:
            batches = await journal.getmany(timeout_ms=1000, max_records=20_000)
            now = self.clock()
            for records in batches.values():
                for record in records:
                    self._read_fact(record.value, now, catching_up=False)
            self._join(hub)

    def _read_fact(self, value: bytes | None, now: float, *, catching_up: bool) -> None:
        if not value or not (_REGISTERED in value or (catching_up and _REPORTED in value)):
            return
        try:
            event = decode_fact(value)  # a fact the platform dead-letters is no device to play
        except MalformedRecord as error:
            log.debug("simulator: skipping a journal record: %s", error)
            return
        if catching_up or isinstance(event, DeviceRegistered):
            self.learn(event, now)

    async def _take_commands(self, hub: DeviceConnection) -> None:
        while True:
            command = await hub.commands.get()
            try:
                self.on_command(command, self.clock())
            except Exception:  # one command a device cannot carry out stops no other
                log.exception("simulator: device command %s failed", command.command_id)

    async def _play_loop(self, hub: DeviceConnection) -> None:
        while True:
            self._poke.clear()
            for topic, payload in self.tick(self.clock()):
                if topic.split("/", 3)[2] not in self.allowed:  # hearth/devices/{id}/...: not yet
                    self.stats["unsent_not_allowed_yet"] += 1
                    continue
                hub.link.publish(topic, payload).add_done_callback(self._delivered)
            delay = min(max(self.next_wake_at() - self.clock(), MIN_TICK_S), MAX_TICK_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), delay)

    def _delivered(self, sent: asyncio.Future[Any]) -> None:
        if not sent.cancelled() and sent.exception() is not None:
            self._count_send_error(sent.exception())

    def _count_send_error(self, error: BaseException | None) -> None:
        self.stats["send_errors"] += 1
        if self.stats["send_errors"] in (1, 10, 100) or self.stats["send_errors"] % 1000 == 0:
            log.warning("simulator: %d sends failed, latest: %r", self.stats["send_errors"], error)

    async def _log_stats(self) -> None:
        while True:
            await asyncio.sleep(STATS_EVERY_S)
            log.info("simulator: %d devices, %s", len(self.players), dict(sorted(self.stats.items())))


def _datetime(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


async def run_fleet(
    bootstrap: str, topics: Topics, options: FleetOptions, mqtt: MqttEndpoint, stop: asyncio.Event
) -> None:
    """Play every simulated device of a known type over MQTT until ``stop`` is set."""
    await Fleet(bootstrap, topics, options, mqtt=mqtt).run(stop)


__all__ = ["Fleet", "FleetOptions", "MqttEndpoint", "run_fleet"]
