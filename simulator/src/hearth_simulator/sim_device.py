"""What every simulated device shares: a deterministic model with no Kafka and no wall clock.

Each device type's model is a ``SimDevice`` subclass named ``MODEL`` in
``hearth_simulator.devices.sim_<type name>`` (models.py finds it by the type's name).

Time is passed in (``now``: seconds since the epoch, so the time of day is ``now % 86400`` UTC) and every
random draw comes from the model's own ``random.Random(seed)``: the same seed and the same calls give
the same readings. Each model answers:

* ``apply_command(name, params, now) -> (ok, reason)``: what the device's ack says;
* ``step(now) -> dict | None``: what to report now: the whole state when telemetry is due (every
  ``1/rate`` s), the discrete keys that changed (a mode, a target, a lock state...) as soon as they
  change, else None;
* ``advance(now)``: the physics up to ``now``, reporting nothing (a replay reads the model itself);
* ``state``: the whole current state; ``wake_at``: when ``step`` will next have something to say
  (a caller may step more often; a command may make it say something sooner);
* ``drift(per_h)``: what a drifting firmware does to it (the core calls it without knowing the model).
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from hearth_shared.domain import CommandInvalid
from hearth_simulator.options import FleetOptions

JSON = dict[str, Any]

MAX_STEP_S = 60.0  # physics is integrated in steps of at most this much simulated time
DAY_S = 86_400.0


class SimDevice:
    """What every simulated device shares: its clock, telemetry schedule and change reporting."""

    device_type: ClassVar[str]
    discrete_keys: ClassVar[tuple[str, ...]]  # reported as soon as they change; the rest with telemetry
    demo_names: ClassVar[tuple[str, ...]]  # the demo home's devices of this type, by name
    firmware: ClassVar[str] = "1.0.0"  # the firmware a new device runs

    def __init__(self, *, seed: int | str, rate: float, start: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, not {rate}")
        self.rng = random.Random(seed)
        self.firmware_version = self.firmware
        self.report_every_s = 1.0 / rate
        self.clock = start
        # Devices switched on together spread their telemetry over the interval.
        self.telemetry_at = start + self.rng.random() * self.report_every_s
        self._said: JSON = {}

    @classmethod
    def for_fleet(cls, options: FleetOptions, device_id: str, rng: random.Random, now: float) -> SimDevice:
        """A device of the fleet, its character drawn from ``rng`` (seeded by its id) and its faults
        from ``options``."""
        raise NotImplementedError

    @property
    def state(self) -> JSON:
        """The whole current state: the type's readings and the keys every device reports."""
        return {**self.readings, "firmware_version": self.firmware_version}

    @property
    def readings(self) -> JSON:
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
        changed = {
            key: state[key]
            for key in (*self.discrete_keys, "firmware_version")
            if self._said.get(key) != state[key]
        }
        if not changed:
            return None
        self._said.update(changed)
        return changed

    def restore(self, reported: JSON) -> None:
        """Take up the state the device last reported (a gateway restarting remembers its devices)."""
        if isinstance(reported.get("firmware_version"), str):
            self.firmware_version = reported["firmware_version"]
        self._restore(reported)

    def advance(self, now: float) -> None:
        """The physics up to ``now``, nothing reported (a replay that reads the model's own state: the
        learn bench's)."""
        self._advance(now)

    def drift(self, per_h: float) -> None:
        """A firmware that ``drifts`` started (``per_h``, its ``FirmwareOptions.drift_c_per_h``) or was
        replaced (0.0). Each model says what that does to it (a thermostat's reading drifts); by default,
        nothing."""

    def _restore(self, reported: JSON) -> None:
        """The type's own keys of ``restore``."""

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
