"""Weeks of a household's history, made at once: what each simulated thermostat would have said, with
its device time in the past, as the MQTT messages it would have published (no broker, no clock:
history_writer.py publishes them).

A ``History`` plays every room (one thermostat of a home) from ``start`` to ``end`` (epoch seconds; the
writer ends it at about now): the physics every ``STEP_S`` simulated seconds (sim_thermostat.py), the
household's manual changes (household.py) at their own jittered times, made on the device's panel
(``SimThermostat.set_on_panel``, so the report carries ``panel_changes``), the outdoor temperature of the
home (outdoor.py). Each room reports as a live thermostat does: the whole state every
``telemetry_every_s`` (15 minutes), a discrete key (``hvac_action``, ``target_c``...) as soon as it changes,
which is what a learner needs to fit heating periods and find manual changes. At ``end`` every room
reports its whole state, so each twin ends at the history's last moment (about now), which a live hub,
playing the device on, continues from.

``slices`` yields the messages an hour of simulated time at a time, every room's in each slice, so
every device keeps reporting while the history is written: the device actor judges a device's silence by
the platform's clock (``last_seen``), never by its device time, so a device reporting weeks-old device
times is online, and is taken offline only ``offline_after`` after the writer stops.

``device_seq``: a room's reports number on from ``seq_base`` (the writer's: its start in ms plus
``HISTORY_SEQ_LEAD``), one per report, so they are newer than anything a live hub said for the device
before (its seqs start at its own start in ms, fleet_core.py) and stay in order: none reaches the actor
after a newer one of its device.

Every draw is seeded by (``seed``, home, room): the same seed, span and rooms give the same messages.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from hearth_shared.schema.mqtt import StateMessage, encode_message, state_topic
from hearth_simulator.devices.sim_thermostat import SimThermostat
from hearth_simulator.household import Household, ManualChange
from hearth_simulator.outdoor import Outdoor

Record = tuple[str, bytes]  # (MQTT topic, payload)

STEP_S = 60.0  # how often a room's physics and discrete keys are looked at (hvac_action to the minute)
TELEMETRY_EVERY_S = 900.0
SLICE_S = 3600.0
HISTORY_SEQ_LEAD = 10**10  # ms (about 116 days): history's seqs lie above any live hub's of the time


@dataclass(frozen=True)
class Home:
    """A home to make history for: its thermostats' device ids."""

    home_id: str
    thermostats: tuple[str, ...]


@dataclass
class Room:
    """One thermostat of a home, played from the history's start."""

    home_id: str
    device_id: str
    model: SimThermostat
    changes: list[ManualChange]
    seq: int
    topic: str
    offset_c: float = 0.0  # the room's targets against the household's routine (0.0 for a home's first)
    next_change: int = 0


def parse_duration(text: str) -> float:
    """``6w``, ``2d``, ``12h``, ``30m`` (or a number of seconds) in seconds."""
    units = {"w": 7 * 86_400.0, "d": 86_400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
    text = text.strip().lower()
    if text and text[-1] in units:
        value, unit = float(text[:-1]), units[text[-1]]
    else:
        value, unit = float(text), 1.0
    if value <= 0:
        raise ValueError(f"a duration must be positive, not {text!r}")
    return value * unit


def household_of(home_id: str, seed: int) -> tuple[Household, Outdoor]:
    """The home's outdoor climate and occupants (both seeded by the home id)."""
    outdoor = Outdoor.for_home(random.Random(f"{seed}/outdoor/{home_id}"))
    return Household.for_home(home_id, outdoor.time_zone, seed=seed), outdoor


class History:
    """The messages of every room of ``homes`` from ``start`` to ``end`` (see the module docstring)."""

    def __init__(
        self,
        homes: Sequence[Home],
        start: float,
        end: float,
        *,
        seq_base: int,
        seed: int = 0,
        telemetry_every_s: float = TELEMETRY_EVERY_S,
    ) -> None:
        if end <= start:
            raise ValueError("the history must end after it starts")
        self.start, self.end, self.seq_base = start, end, seq_base
        self.rooms: list[Room] = []
        self.households: dict[str, Household] = {}
        for home in homes:
            household, outdoor = household_of(home.home_id, seed)
            self.households[home.home_id] = household
            for n, device_id in enumerate(home.thermostats):
                self.rooms.append(
                    self._room(home, device_id, n, household, outdoor, seed, seq_base, telemetry_every_s)
                )

    def _room(
        self,
        home: Home,
        device_id: str,
        n: int,
        household: Household,
        outdoor: Outdoor,
        seed: int,
        seq_base: int,
        telemetry_every_s: float,
    ) -> Room:
        rng = random.Random(f"{seed}/room/{device_id}")
        offset_c = 0.0 if n == 0 else rng.choice((-1.0, -0.5, 0.0, 0.5))  # the first room: the routine's
        local = datetime.fromtimestamp(self.start, UTC).astimezone(ZoneInfo(household.time_zone))
        target = household.target_at(local.date(), local.hour * 60 + local.minute) + offset_c
        model = SimThermostat(
            seed=f"{seed}/{device_id}",
            rate=1.0 / telemetry_every_s,
            start=self.start,
            ambient_c=target - rng.uniform(0.0, 1.0),
            humidity_pct=rng.uniform(35.0, 55.0),
            hvac_mode="heat",
            target_c=target,
            insulation_h=rng.uniform(5.0, 12.0),
            heat_c_per_h=rng.uniform(2.5, 5.0),
            outdoor=outdoor,
        )
        changes = household.changes(self.start, self.end, room=device_id, room_offset_c=offset_c)
        return Room(home.home_id, device_id, model, changes, seq_base, state_topic(device_id), offset_c)

    @property
    def manual_changes(self) -> dict[str, list[ManualChange]]:
        """Every room's manual changes over the span, by device id (what a test checks the journal for)."""
        return {room.device_id: room.changes for room in self.rooms}

    def slices(self, slice_s: float = SLICE_S) -> Iterator[list[Record]]:
        """The messages of each ``slice_s`` of simulated time, every room's, each room's in time order."""
        t = self.start
        while t < self.end:
            until = min(t + slice_s, self.end)
            out: list[Record] = []
            for room in self.rooms:
                self._play(room, t, until, out)
            yield out
            t = until

    def _play(self, room: Room, start: float, until: float, out: list[Record]) -> None:
        model, changes = room.model, room.changes
        t = start
        while t < until:
            step_to = min(t + STEP_S, until)
            while room.next_change < len(changes) and changes[room.next_change].t < step_to:
                change = changes[room.next_change]
                room.next_change += 1
                model.set_on_panel(change.target_c, change.t)
                self._report(room, change.t, out)  # the change at its own time, to the second
            if step_to >= self.end:
                model.telemetry_at = step_to  # the last moment: the whole state, so the twin ends at it
            self._report(room, step_to, out)
            t = step_to

    @staticmethod
    def _report(room: Room, t: float, out: list[Record]) -> None:
        state = room.model.step(t)
        if state is None:
            return
        room.seq += 1
        message = StateMessage(seq=room.seq, at=datetime.fromtimestamp(t, UTC), state=state)
        out.append((room.topic, encode_message(message)))


__all__ = ["HISTORY_SEQ_LEAD", "History", "Home", "Record", "Room", "household_of", "parse_duration"]
