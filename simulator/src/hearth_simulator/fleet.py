"""The simulated hub: plays every simulated device of a type it has a model for (models.py) over MQTT, as
a customer's hub would.

``Fleet`` learns its devices from the journal (``device.registered`` facts with ``simulated`` of a type it
has a model for, read from the first offset and then followed, so a device registered later is picked up
live; while playing, a state report of one of its devices with a seq above its own is another writer's,
``hearth simulate --history``'s, and the hub stands aside: ``FleetCore.learn``). It is a hub of the device
SDK (``hearth_device.DeviceConnection(hub=True)``): one MQTT connection with the simulator's credential,
which the broker lets act only for simulated devices, and only once the broker has loaded the ACL lines of a
device registered a moment ago: the hub acts for a device (and publishes its reports) only after the
retained ``allowed`` on ``hearth/hubs/{hub}/devices/{device}``
(``hearth_shared.schema.mqtt.hub_child_topic``), since the broker drops a connection that publishes what its
ACL denies. It receives each device's commands on its ``commands`` topic, applies and acks them, and
publishes the devices' reports and acks to their ``state`` and ``acks`` topics; the device gateway takes
them to the inbox. Nothing here writes Kafka. Publishes are never awaited one by one (the SDK keeps up to
the broker's receive maximum in flight), and one loop serves all devices: a heap of wake-up times, so a tick
touches only the devices that have something to say.

MQTT broker shards (``hearth_shared.schema.shards``): a device connects to its shard's broker, so the
fleet is a hub per shard (``mqtt``: an endpoint by shard name), each on its shard's platform listener, and
plays each device through the hub of the shard the journal says it is on (``device.registered``, then
``device.shard_moved``: the hub of its new shard takes it over, says it is online there, and gets its
commands). The broker-access followers let the simulator's account act for every simulated device on
every shard, so a move needs no reload first; each hub still acts for a device only after its broker's
``allowed``.

The synchronous core (``FleetCore``: ``learn``, ``on_command``, ``tick``, the faults of ``FleetOptions``,
options.py) is ``hearth_simulator.fleet_core``; it runs without a broker. ``Fleet`` adds the wiring:
``run`` reads the journal (read only) and speaks MQTT.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer

from hearth_device import DeviceConnection
from hearth_shared.adapters.kafka import held_fetches, topic_partitions
from hearth_shared.adapters.mqtt_link import MessageHandler
from hearth_shared.adapters.topics import Topics
from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.events import (
    DeviceRegistered,
    DeviceShardMoved,
    Event,
    MalformedRecord,
    StateReported,
    wire_name,
)
from hearth_shared.schema.mqtt import ALLOWED, PLATFORM_PORT, hub_child_topic
from hearth_shared.schema.shards import DEFAULT_SHARD
from hearth_simulator.fleet_core import MIN_TICK_S, FleetCore
from hearth_simulator.options import FleetOptions

log = logging.getLogger(__name__)

# Only these journal facts are decoded; a cheap substring test skips every other record.
_REGISTERED = wire_name(DeviceRegistered).encode()
_REPORTED = wire_name(StateReported).encode()
_MOVED = wire_name(DeviceShardMoved).encode()
_DEVICE_SEQ = re.compile(rb'"device_seq":(\d+)')  # a state report's seq, read off its bytes

# The loop sleeps at least MIN_TICK_S between ticks (unless a command arrives), at most MAX_TICK_S.
MAX_TICK_S = 0.5
JOURNAL_FETCH_WAIT_MS = 200
STATS_EVERY_S = 30.0


@dataclass(frozen=True)
class MqttEndpoint:
    """Where the hub connects, and as whom (the local stack's simulator account)."""

    host: str = "127.0.0.1"
    port: int = PLATFORM_PORT  # the service accounts' listener
    username: str = "_hearth_simulator"
    password: str = ""


class Fleet(FleetCore):
    """The hubs: the core (every simulated device and the faults it plays) and the wiring (``run``)."""

    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        options: FleetOptions,
        *,
        mqtt: MqttEndpoint | Mapping[str, MqttEndpoint] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(options, clock=clock)
        self.bootstrap = bootstrap
        self.topics = topics
        # Where each shard's hub connects (one endpoint: the one broker there is, the default shard).
        self.endpoints = dict(mqtt) if isinstance(mqtt, Mapping) else {DEFAULT_SHARD: mqtt or MqttEndpoint()}
        self._poke = asyncio.Event()  # a command arrived or a device was added: tick now
        # Devices each shard's broker lets its hub act for (``run`` only).
        self.allowed: dict[str, set[str]] = {shard: set() for shard in self.endpoints}
        self.shard_of: dict[str, str] = {}  # device -> its shard, unless the default
        self._hubs: dict[str, DeviceConnection] = {}

    def _wake(self) -> None:
        self._poke.set()

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
            # Registrations may reach the hub a moment late (it waits for the broker's `allowed` anyway);
            # held fetches, not one per journal write (the journal carries every command's facts).
            **held_fetches(JOURNAL_FETCH_WAIT_MS),
        )
        for shard, mqtt in self.endpoints.items():
            hub = DeviceConnection(
                username=mqtt.username, password=mqtt.password, host=mqtt.host, port=mqtt.port, hub=True
            )
            hub.link.subscribe(hub_child_topic(mqtt.username, "+"), self._on_allowed(shard))
            self._hubs[shard] = hub
        await journal.start()
        try:
            await self._catch_up(journal)
            for hub in self._hubs.values():
                await hub.connect()
            self._join()
            log.info(
                "simulator: playing %d devices at %g reports/s each, on %d MQTT shards",
                len(self.players),
                self.options.rate,
                len(self._hubs),
            )
            async with asyncio.TaskGroup() as tasks:
                running = [
                    tasks.create_task(self._follow_journal(journal)),
                    *(tasks.create_task(self._take_commands(hub)) for hub in self._hubs.values()),
                    tasks.create_task(self._play_loop()),
                    tasks.create_task(self._log_stats()),
                ]
                await stop.wait()
                for task in running:
                    task.cancel()
        finally:
            for hub in self._hubs.values():  # each says offline (as its will would): its children go offline
                await hub.close()
            await journal.stop()

    def _shard(self, device_id: str) -> str:
        return self.shard_of.get(device_id, DEFAULT_SHARD)

    def _join(self) -> None:
        """Act for every device played through its shard's hub, once that broker allows it and the hub
        does not act for it yet (subscribes to its commands, says it is online there)."""
        for device_id in self.players.keys() - self._joined():
            shard = self._shard(device_id)
            hub = self._hubs.get(shard)
            if hub is not None and device_id in self.allowed[shard]:
                hub.add_device(device_id)

    def _joined(self) -> set[str]:
        return {d for shard, hub in self._hubs.items() for d in hub.devices if self._shard(d) == shard}

    def _on_allowed(self, shard: str) -> MessageHandler:
        async def allowed(topic: str, payload: bytes) -> None:
            """The shard's broker lets its hub act for a device now (a retained message, again on every
            connect). Anything but ``allowed`` (an empty message clearing it...) allows nothing; an id the
            journal never registered as simulated is kept but played by no one."""
            device_id = topic.rsplit("/", 1)[-1]
            if payload != ALLOWED:
                log.info("simulator: ignoring %r on %s", payload[:40], topic)
                return
            self.allowed[shard].add(device_id)
            if device_id in self.players and self._shard(device_id) == shard and shard in self._hubs:
                self._hubs[shard].add_device(device_id)  # a no-op for a device it acts for already

        return allowed

    def learn(self, event: Event, now: float, *, live: bool = False) -> None:
        """The core's, and where each device is: its shard (``device.registered``, ``device.shard_moved``)."""
        if isinstance(event, DeviceRegistered | DeviceShardMoved):
            shard = event.payload.shard
            if shard == DEFAULT_SHARD:
                self.shard_of.pop(event.device_id, None)
            else:
                self.shard_of[event.device_id] = shard
        super().learn(event, now, live=live)

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

    async def _follow_journal(self, journal: AIOKafkaConsumer) -> None:
        while True:
            batches = await journal.getmany(timeout_ms=1000, max_records=20_000)
            now = self.clock()
            for records in batches.values():
                for record in records:
                    if self._worth_reading(record.key, record.value):
                        self._read_fact(record.value, now, catching_up=False)
            self._join()

    def _worth_reading(self, key: bytes | None, value: bytes | None) -> bool:
        """While playing: a registration, or a state report of a device played with a seq above the hub's
        own (another writer's, ``FleetCore.learn``). The hub's own reports come back by the thousand a
        second; a regex on their bytes, not a decode (about 20 µs each), tells them apart."""
        if not value or _REGISTERED in value or _MOVED in value:
            return True
        if _REPORTED not in value or key is None:
            return False
        player = self.players.get(key.decode(errors="replace"))
        seq = _DEVICE_SEQ.search(value)
        return player is not None and seq is not None and int(seq[1]) > player.seq

    def _read_fact(self, value: bytes | None, now: float, *, catching_up: bool) -> None:
        if not value or not (_REGISTERED in value or _REPORTED in value or _MOVED in value):
            return
        try:
            event = decode_fact(value)  # a fact the platform dead-letters is no device to play
        except MalformedRecord as error:
            log.debug("simulator: skipping a journal record: %s", error)
            return
        self.learn(event, now, live=not catching_up)  # live: another writer's reports (history)

    async def _take_commands(self, hub: DeviceConnection) -> None:
        while True:
            command = await hub.commands.get()
            try:
                self.on_command(command, self.clock())
            except Exception:  # one command a device cannot carry out stops no other
                log.exception("simulator: device command %s failed", command.command_id)

    async def _play_loop(self) -> None:
        while True:
            self._poke.clear()
            for topic, payload in self.tick(self.clock()):
                device_id = topic.split("/", 3)[2]  # hearth/devices/{id}/...
                shard = self._shard(device_id)
                hub = self._hubs.get(shard)
                if hub is None or device_id not in self.allowed[shard]:  # not yet (or no hub there)
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


async def run_fleet(
    bootstrap: str,
    topics: Topics,
    options: FleetOptions,
    mqtt: MqttEndpoint | Mapping[str, MqttEndpoint],
    stop: asyncio.Event,
) -> None:
    """Play every simulated device of a known type over MQTT until ``stop`` is set."""
    await Fleet(bootstrap, topics, options, mqtt=mqtt).run(stop)


__all__ = ["Fleet", "FleetOptions", "MqttEndpoint", "run_fleet"]
