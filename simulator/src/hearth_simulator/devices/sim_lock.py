"""The simulated lock (``hearth_shared.domain.lock``)."""

from __future__ import annotations

import math
import random

from hearth_shared.domain import lock as lock_type
from hearth_simulator.options import FleetOptions
from hearth_simulator.sim_device import JSON, SimDevice


class SimLock(SimDevice):
    """A motorized deadbolt with a door sensor and a battery.

    ``lock``/``unlock`` move the bolt for ``move_s`` seconds (``locking``/``unlocking``), unless the motor
    jams (probability ``jam_probability`` per move): then the ack fails with ``device_jammed`` and the lock
    reports ``jammed`` until someone frees it by hand after ``jam_clear_s`` (None: never). While unlocked,
    the door opens now and then (``door_opens_per_h``) and closes again after ``door_open_s``. The
    battery drains slowly, and a little more for each move.
    """

    device_type = lock_type.TYPE.name
    discrete_keys = ("lock_state", "door")
    demo_names = ("Front door", "Back door")
    firmware = "2.0.4"

    MOVES = {"lock": ("locking", "locked"), "unlock": ("unlocking", "unlocked")}

    def __init__(
        self,
        *,
        seed: int | str = 0,
        rate: float = 1.0,
        start: float = 0.0,
        lock_state: str = "locked",
        battery_pct: float = 100.0,
        jam_probability: float = 0.0,
        jam_clear_s: float | None = 120.0,
        move_s: tuple[float, float] = (1.0, 2.0),
        door_opens_per_h: float = 2.0,
        door_open_s: tuple[float, float] = (5.0, 60.0),
        battery_drain_pct_per_h: float = 0.05,
        battery_pct_per_move: float = 0.01,
    ) -> None:
        super().__init__(seed=seed, rate=rate, start=start)
        self.lock_state = lock_state
        self.door_open = False
        self.battery = battery_pct
        self.jam_probability = jam_probability
        self.jam_clear_s = jam_clear_s
        self.move_s = move_s
        self.door_opens_per_s = door_opens_per_h / 3600.0
        self.door_open_s = door_open_s
        self.drain_pct_per_s = battery_drain_pct_per_h / 3600.0
        self.pct_per_move = battery_pct_per_move
        self.moved_at: float | None = None  # when the bolt finishes moving
        self.door_closes_at: float | None = None
        self.unjammed_at: float | None = None
        self.state_before_jam = lock_state

    @classmethod
    def for_fleet(cls, options: FleetOptions, device_id: str, rng: random.Random, now: float) -> SimDevice:
        """Jamming with ``options.jam_probability`` per move."""
        return cls(
            seed=rng.getrandbits(64),
            rate=options.rate,
            start=now,
            battery_pct=rng.uniform(40.0, 100.0),
            jam_probability=options.jam_probability,
        )

    @property
    def readings(self) -> JSON:
        return {
            "lock_state": self.lock_state,
            "door": "open" if self.door_open else "closed",
            "battery_pct": round(self.battery),
        }

    @property
    def wake_at(self) -> float:
        pending = (self.moved_at, self.door_closes_at, self.unjammed_at)
        return min([self.telemetry_at, *(at for at in pending if at is not None)])

    def _restore(self, reported: JSON) -> None:
        settled = {"locking": "locked", "unlocking": "unlocked"}
        state = settled.get(reported.get("lock_state", ""), reported.get("lock_state"))
        if state in ("locked", "unlocked", "jammed"):
            self.lock_state, self.moved_at = state, None
            self.unjammed_at = None
            if state == "jammed" and self.jam_clear_s is not None:
                self.state_before_jam, self.unjammed_at = "unlocked", self.clock + self.jam_clear_s
        if reported.get("door") in ("open", "closed"):
            self.door_open = reported["door"] == "open"
            self.door_closes_at = self.clock + self.rng.uniform(*self.door_open_s) if self.door_open else None
        if isinstance(reported.get("battery_pct"), int | float):
            self.battery = float(reported["battery_pct"])

    def _command(self, name: str, params: JSON, now: float) -> tuple[bool, str]:
        lock_type.TYPE.validate(name, params)
        moving, done = self.MOVES[name]
        if self.lock_state == "jammed":
            return False, "device_jammed"
        if name == "lock" and self.door_open:
            return False, "door_open"
        if self.lock_state in (moving, done):
            return True, ""  # there already, or on its way
        self.battery = max(0.0, self.battery - self.pct_per_move)
        if self.rng.random() < self.jam_probability:
            self.state_before_jam = self.lock_state
            self.lock_state, self.moved_at = "jammed", None
            self.unjammed_at = now + self.jam_clear_s if self.jam_clear_s is not None else None
            return False, "device_jammed"
        self.lock_state, self.moved_at = moving, now + self.rng.uniform(*self.move_s)
        return True, ""

    def _evolve(self, t: float, dt: float) -> None:
        end = t + dt
        if self.moved_at is not None and self.moved_at <= end:
            self.lock_state = "locked" if self.lock_state == "locking" else "unlocked"
            self.moved_at = None
        if self.unjammed_at is not None and self.unjammed_at <= end:
            freed = self.state_before_jam
            self.lock_state = {"locking": "unlocked", "unlocking": "locked"}.get(freed, freed)
            self.unjammed_at = None
        if self.door_open:
            if self.door_closes_at is not None and self.door_closes_at <= end:
                self.door_open, self.door_closes_at = False, None
        elif self.lock_state == "unlocked" and self.rng.random() < 1.0 - math.exp(
            -self.door_opens_per_s * dt
        ):
            self.door_open, self.door_closes_at = True, end + self.rng.uniform(*self.door_open_s)
        self.battery = max(0.0, self.battery - self.drain_pct_per_s * dt)


MODEL = SimLock
