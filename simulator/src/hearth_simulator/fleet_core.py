"""The simulated hub's synchronous core: every simulated device it plays, and the faults it plays them
with, as a function of the clock; no broker, no network (``hearth_simulator.fleet`` wires it to the
journal and MQTT).

``learn`` takes in a journal fact (a simulated device's registration adds it; a state report restores what
it said; read while playing, another writer's report makes the hub stand aside for a while), ``on_command``
applies a device's command and queues its ack, ``tick`` returns every MQTT message due by then as (topic,
payload). One heap of wake-up times, so a tick touches only the devices that have something to say.

An ack carries the report of what changed since the device last spoke (the ``acks`` ``report``), as a
device using the SDK's ``ack(..., report=...)`` would: due at once (no ``ack_delay_s``), it carries its
command's change, which is then not reported again; a slow ack comes after the change's own report; a
lost ack's change goes out in that report all the same.

``FleetOptions`` (options.py) make it a poor network on purpose: devices going silent for a while, slow
or lost acks, reports sent twice, two consecutive reports swapped (with their seqs: the actor must record
of the older only the keys the newer did not carry), and the faults of each type's model (thermostats
whose reading drifts, locks that jam...: each model's ``for_fleet`` reads its own from the options,
``fault_rates`` for those without a field there). The core knows no model by name: it finds them by
type (models.py) and speaks to every one through ``SimDevice`` (a drifting firmware, too:
``SimDevice.drift``).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec

from hearth_device import Command
from hearth_shared.schema.events import DeviceRegistered, Event, StateReported
from hearth_shared.schema.mqtt import AckMessage, StateMessage, acks_topic, encode_message, state_topic
from hearth_simulator import firmware
from hearth_simulator.firmware import DeviceFirmware
from hearth_simulator.models import SIM_MODELS, SimDevice
from hearth_simulator.options import FleetOptions

Record = tuple[str, bytes]  # (MQTT topic, payload) to publish

MIN_TICK_S = 0.01  # a device played is next due this long after now at the soonest


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


class FleetCore:
    """The devices played and what they say, driven by ``learn``, ``on_command`` and ``tick``."""

    def __init__(self, options: FleetOptions, *, clock: Callable[[], float] = time.time) -> None:
        self.options = options
        self.clock = clock
        self.rng = random.Random(options.seed)
        self.players: dict[str, _Player] = {}
        self.stats: Counter[str] = Counter()
        self._heap: list[tuple[float, int, _Player]] = []
        self._order = itertools.count()  # heap tie-breaker
        self._acks: deque[tuple[float, _Player, AckMessage]] = deque()  # (due, device, ack), in due order
        silent_s = sum(options.offline_s) / 2
        f = options.offline_fraction
        self._silence_per_s = f / ((1 - f) * silent_s)  # so that about f of the time is spent silent

    def _wake(self) -> None:
        """A command arrived or a device was added: whoever drives ``tick`` may want to tick now."""

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
        self._wake()
        return True

    def learn(self, event: Event, now: float, *, live: bool = False) -> None:
        """Take in a journal fact: a simulated device's registration adds it, a state report restores what
        it said.

        ``live``: a fact read while playing (not catching up). A report with a seq above the last one the
        hub sent was not the hub's: another writer speaks for the device (``hearth simulate --history``,
        whose seqs lie above, history.py). The hub stands aside: takes up what it said and its seq, and
        stays silent until ``options.stand_aside_s`` after its latest such report, then plays the device
        on from there (so a history ends in the live device, its seqs above the history's)."""
        if isinstance(event, DeviceRegistered) and event.payload.simulated:
            self.add_device(event.device_id, event.payload.device_type, now)
        elif isinstance(event, StateReported) and (player := self.players.get(event.device_id)):
            if live and event.payload.device_seq <= player.seq:
                return  # the hub's own report, or an older one
            player.model.restore(event.payload.reported)
            player.firmware.restore(event.payload.reported)
            player.seq = max(player.seq, event.payload.device_seq)
            if live:
                player.silent_until = max(player.silent_until, now + self.options.stand_aside_s)
                player.held = None
                self.stats["stood_aside"] += 1

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
        self._schedule(player, now)  # report the change right away (with the ack if it is due now: tick)
        self.stats["commands_ok" if ok else "commands_failed"] += 1
        options = self.options
        if options.lost_ack_fraction and self.rng.random() < options.lost_ack_fraction:
            self.stats["acks_lost"] += 1
            return
        due = now + options.ack_delay_s
        ack = AckMessage(command_id=command.command_id, result="ok" if ok else "failed", reason=reason)
        self._acks.append((due, player, ack))
        self._wake()

    def _admin_command(self, player: _Player, command: Command, now: float) -> tuple[bool, str]:
        """``reboot`` / ``update_firmware``: the ack, then silence while it installs (firmware.py)."""
        outcome = firmware.command(self.options.firmware, command.name, command.params)
        was_drifting = player.firmware.drifting
        firmware.apply(player.firmware, outcome)
        player.model.firmware_version = player.firmware.version  # its telemetry says what it now runs
        if player.firmware.drifting != was_drifting:  # each model says what a drifting firmware does to it
            player.model.drift(self.options.firmware.drift_c_per_h if outcome.drifts else 0.0)
        if outcome.silent_s:
            player.silent_until = now + outcome.silent_s
            player.held = None
        self.stats[f"firmware_{'ok' if outcome.ok else outcome.reason}"] += 1
        return outcome.ok, outcome.reason

    def tick(self, now: float) -> list[Record]:
        """Everything due by ``now``: acks (each with the report of what its command changed, if it
        did), then every due device's report."""
        out: list[Record] = []
        acks = self._acks
        while acks and acks[0][0] <= now:
            _, player, ack = acks.popleft()
            ack = msgspec.structs.replace(ack, report=self._answer(player, now))
            out.append((acks_topic(player.device_id), encode_message(ack)))
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

    def _answer(self, player: _Player, now: float) -> StateMessage | None:
        """The report an ack carries: what changed since the device last spoke (None if nothing did, or
        if it is out of reach), under its next seq, so it is ordered among its reports as sent."""
        if player.silent_until > now:
            return None
        report = player.model.step(now)
        if report is None:
            return None
        player.seq += 1
        self.stats["reports_with_acks"] += 1
        return StateMessage(seq=player.seq, at=_datetime(now), state=report)

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
            out.append(
                (player.state_topic, player.held)
            )  # the older one second: only its keys the newer lacks count
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


def _datetime(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)
