"""Simulated devices: deterministic models of a thermostat and a lock, with no Kafka and no wall clock.

Time is passed in (``now``: seconds since the epoch, so the time of day is ``now % 86400`` UTC) and every
random draw comes from the model's own ``random.Random(seed)``: the same seed and the same calls give
the same readings. Each model answers:

* ``apply_command(name, params, now) -> (ok, reason)``: what the device's ack says;
* ``step(now) -> dict | None``: what to report now: the whole state when telemetry is due (every
  ``1/rate`` s), the discrete keys that changed (a mode, a target, a lock state...) as soon as they
  change, else None;
* ``state``: the whole current state; ``wake_at``: when ``step`` will next have something to say
  (a caller may step more often; a command may make it say something sooner).
"""

from __future__ import annotations

import math
import random
from typing import Any, ClassVar

from hearth_shared.domain import CommandInvalid
from hearth_shared.domain import lock as lock_type
from hearth_shared.domain import thermostat as thermostat_type

JSON = dict[str, Any]

MAX_STEP_S = 60.0  # physics is integrated in steps of at most this much simulated time
DAY_S = 86_400.0


class SimDevice:
    """What every simulated device shares: its clock, telemetry schedule and change reporting."""

    device_type: ClassVar[str]
    discrete_keys: ClassVar[tuple[str, ...]]  # reported as soon as they change; the rest with telemetry

    def __init__(self, *, seed: int | str, rate: float, start: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, not {rate}")
        self.rng = random.Random(seed)
        self.report_every_s = 1.0 / rate
        self.clock = start
        # Devices switched on together spread their telemetry over the interval.
        self.telemetry_at = start + self.rng.random() * self.report_every_s
        self._said: JSON = {}

    @property
    def state(self) -> JSON:
        raise NotImplementedError

    @property
    def wake_at(self) -> float:
        return self.telemetry_at

    def apply_command(self, name: str, params: JSON, now: float) -> tuple[bool, str]:
        """Carry out a command: ``(True, "")``, or ``(False, reason)`` when the device cannot."""
        self._advance(now)
        try:
            return self._command(name, params, now)
        except CommandInvalid as invalid:
            return False, invalid.reason

    def step(self, now: float) -> JSON | None:
        self._advance(now)
        state = self.state
        if now >= self.telemetry_at:
            self.telemetry_at += self.report_every_s
            if self.telemetry_at <= now:  # fell behind (a long pause): start the rhythm again from now
                self.telemetry_at = now + self.report_every_s
            self._said = dict(state)
            return state
        changed = {key: state[key] for key in self.discrete_keys if self._said.get(key) != state[key]}
        if not changed:
            return None
        self._said.update(changed)
        return changed

    def restore(self, reported: JSON) -> None:
        """Take up the state the device last reported (a gateway restarting remembers its devices)."""

    def _advance(self, now: float) -> None:
        t = self.clock
        while t < now:
            end = min(t + MAX_STEP_S, now)
            self._evolve(t, end - t)
            t = end
        self.clock = max(self.clock, now)

    def _evolve(self, t: float, dt: float) -> None:
        """Physics over ``[t, t + dt]``."""

    def _command(self, name: str, params: JSON, now: float) -> tuple[bool, str]:
        raise NotImplementedError


class SimThermostat(SimDevice):
    """A room with a heater and an air conditioner, leaking heat to an outside that follows the day.

    The room moves toward the outside temperature with time constant ``insulation_h``; heating adds
    ``heat_c_per_h``, cooling removes ``cool_c_per_h``. The thermostat starts heating below
    ``target - HYSTERESIS_C`` and stops at the target (cooling mirrors it), so it cycles just under or
    over its target. ``drift_c_per_h`` makes a faulty sensor: the reported ``ambient_c`` drifts away from
    the room's real temperature, which the control loop (on a good sensor) keeps at the target.
    """

    device_type = thermostat_type.name
    discrete_keys = ("hvac_mode", "hvac_action", "target_c", "target_low_c", "target_high_c")

    HYSTERESIS_C = 0.5
    HUMIDITY_MEAN_PCT = 45.0
    MAX_DRIFT_C = 30.0

    def __init__(
        self,
        *,
        seed: int | str = 0,
        rate: float = 1.0,
        start: float = 0.0,
        ambient_c: float = 20.0,
        humidity_pct: float = 45.0,
        hvac_mode: str = "heat",
        target_c: float = 21.0,
        target_low_c: float = 19.0,
        target_high_c: float = 24.0,
        outside_mean_c: float = 10.0,
        outside_swing_c: float = 5.0,
        insulation_h: float = 8.0,
        heat_c_per_h: float = 4.0,
        cool_c_per_h: float = 3.0,
        drift_c_per_h: float = 0.0,
    ) -> None:
        super().__init__(seed=seed, rate=rate, start=start)
        self.ambient = ambient_c  # the room's real temperature
        self.humidity = humidity_pct
        self.hvac_mode = hvac_mode
        self.target_c = target_c
        self.target_low_c = target_low_c
        self.target_high_c = target_high_c
        self.auto_uses_pair = False  # in auto: the low/high pair if that was set last, else target_c
        self.outside_mean_c = outside_mean_c
        self.outside_swing_c = outside_swing_c
        self.insulation_s = insulation_h * 3600.0
        self.heat_c_per_s = heat_c_per_h / 3600.0
        self.cool_c_per_s = cool_c_per_h / 3600.0
        self.drift_c_per_s = drift_c_per_h / 3600.0
        self.drift_c = 0.0  # how far the sensor has drifted from the real temperature
        self.reading_c = ambient_c
        self.hvac_action = "off"
        self.hvac_action = self._next_action()

    @property
    def state(self) -> JSON:
        return {
            "ambient_c": round(self.reading_c, 1),
            "humidity_pct": round(self.humidity, 1),
            "hvac_mode": self.hvac_mode,
            "hvac_action": self.hvac_action,
            "target_c": self.target_c,
            "target_low_c": self.target_low_c,
            "target_high_c": self.target_high_c,
        }

    def outside_c(self, t: float) -> float:
        """The outside temperature at time ``t``: coldest at 04:00, warmest at 16:00 (UTC)."""
        hour = (t % DAY_S) / 3600.0
        return self.outside_mean_c - self.outside_swing_c * math.cos(2 * math.pi * (hour - 4.0) / 24.0)

    def restore(self, reported: JSON) -> None:
        if reported.get("hvac_mode") in thermostat_type.MODES:
            self.hvac_mode = reported["hvac_mode"]
        for key in ("target_c", "target_low_c", "target_high_c"):
            if isinstance(reported.get(key), int | float):
                setattr(self, key, float(reported[key]))
        if isinstance(reported.get("ambient_c"), int | float):
            self.ambient = self.reading_c = float(reported["ambient_c"])
        if isinstance(reported.get("humidity_pct"), int | float):
            self.humidity = float(reported["humidity_pct"])
        self.hvac_action = self._next_action()

    def _command(self, name: str, params: JSON, now: float) -> tuple[bool, str]:
        params = thermostat_type.validate(name, params)  # the device holds to the same limits
        if name == "set_hvac_mode":
            self.hvac_mode = params["mode"]
        elif "target_c" in params:
            self.target_c = params["target_c"]
            self.auto_uses_pair = False
        else:
            self.target_low_c, self.target_high_c = params["target_low_c"], params["target_high_c"]
            self.auto_uses_pair = True
        self.hvac_action = self._next_action()
        return True, ""

    def _evolve(self, t: float, dt: float) -> None:
        if self.hvac_action == "heating":
            hvac = self.heat_c_per_s
        elif self.hvac_action == "cooling":
            hvac = -self.cool_c_per_s
        else:
            hvac = 0.0
        leak = (self.outside_c(t + dt / 2) - self.ambient) / self.insulation_s
        self.ambient += (leak + hvac) * dt
        drying = 0.5 / 3600.0 if self.hvac_action == "cooling" else 0.0  # air conditioning dries the air
        self.humidity += (self.HUMIDITY_MEAN_PCT - self.humidity) * dt / 7200.0 - drying * dt
        self.humidity = min(85.0, max(15.0, self.humidity + self.rng.gauss(0.0, 0.03 * math.sqrt(dt))))
        drift = self.drift_c + self.drift_c_per_s * dt
        self.drift_c = min(self.MAX_DRIFT_C, max(-self.MAX_DRIFT_C, drift))
        self.reading_c = self.ambient + self.drift_c + self.rng.gauss(0.0, 0.03)
        self.hvac_action = self._next_action()

    def _setpoints(self) -> tuple[float | None, float | None]:
        """(heat up to, cool down to) in the current mode; None where that side is off."""
        mode = self.hvac_mode
        if mode == "heat":
            return self.target_c, None
        if mode == "cool":
            return None, self.target_c
        if mode == "heat_cool" or (mode == "auto" and self.auto_uses_pair):
            return self.target_low_c, self.target_high_c
        if mode == "auto":
            return self.target_c, self.target_c
        return None, None

    def _next_action(self) -> str:
        if self.hvac_mode == "off":
            return "off"
        heat_to, cool_to = self._setpoints()
        room, action, band = self.ambient, self.hvac_action, self.HYSTERESIS_C
        if heat_to is not None and (room < heat_to - band or (action == "heating" and room < heat_to)):
            return "heating"
        if cool_to is not None and (room > cool_to + band or (action == "cooling" and room > cool_to)):
            return "cooling"
        return "idle"


class SimLock(SimDevice):
    """A motorized deadbolt with a door sensor and a battery.

    ``lock``/``unlock`` move the bolt for ``move_s`` seconds (``locking``/``unlocking``), unless the motor
    jams (probability ``jam_probability`` per move): then the ack fails with ``device_jammed`` and the lock
    reports ``jammed`` until someone frees it by hand after ``jam_clear_s`` (None: never). While unlocked,
    the door opens now and then (``door_opens_per_h``) and closes again after ``door_open_s``. The
    battery drains slowly, and a little more for each move.
    """

    device_type = lock_type.name
    discrete_keys = ("lock_state", "door")

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

    @property
    def state(self) -> JSON:
        return {
            "lock_state": self.lock_state,
            "door": "open" if self.door_open else "closed",
            "battery_pct": round(self.battery),
        }

    @property
    def wake_at(self) -> float:
        pending = (self.moved_at, self.door_closes_at, self.unjammed_at)
        return min([self.telemetry_at, *(at for at in pending if at is not None)])

    def restore(self, reported: JSON) -> None:
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
        lock_type.validate(name, params)
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


SIM_MODELS: dict[str, type[SimDevice]] = {
    SimThermostat.device_type: SimThermostat,
    SimLock.device_type: SimLock,
}
"""The device types the simulator can play, by their domain name."""
