"""The simulated light (``hearth_shared.domain.light``): a dimmable bulb whose level and colour move
linearly over a command's ``transition_s``, reporting the way there once a second.

``turn_on`` switches power on at once (from brightness 1 if it was off) and moves brightness and colour
to what was asked (or the level it last had). ``turn_off`` dims to 1 over the transition, then switches
off and remembers the level it had for the next ``turn_on``.

Faults (``FleetOptions.fault_rates``): ``bulb_failure``, the chance per command that the bulb burns out:
the ack fails with ``bulb_failed``, the light reports power off, and it refuses commands the same way
until it is replaced ``replace_s`` later; ``slow_transition``, the share of bulbs whose transitions take
``slow_factor`` times as long as asked.
"""

from __future__ import annotations

import random

from hearth_shared.domain import light as light_type
from hearth_simulator.options import FleetOptions
from hearth_simulator.sim_device import JSON, SimDevice

REPORT_EVERY_S = 1.0  # during a transition


class SimLight(SimDevice):
    """A bulb: ``level`` and ``kelvin`` are where it is, ``_from``/``_to`` a transition in progress."""

    device_type = light_type.TYPE.name
    discrete_keys = ("power", "brightness_pct", "color_temp_k")
    demo_names = ("Hall light", "Reading lamp")
    firmware = "1.8.3"

    def __init__(
        self,
        *,
        seed: int | str = 0,
        rate: float = 1.0,
        start: float = 0.0,
        power: str = "off",
        brightness_pct: int = 80,
        color_temp_k: int = 2700,
        failure_probability: float = 0.0,
        replace_s: float = 300.0,
        slow_factor: float = 1.0,
    ) -> None:
        super().__init__(seed=seed, rate=rate, start=start)
        self.power = power
        self.level = float(brightness_pct)
        self.kelvin = float(color_temp_k)
        self.remembered = float(brightness_pct)  # the level to come back to after an off
        self.failure_probability = failure_probability
        self.replace_s = replace_s
        self.slow_factor = slow_factor
        self.failed_until: float | None = None
        # A transition: (start time, end time, (level, kelvin) at start, (level, kelvin) at end, power after).
        self.transition: tuple[float, float, tuple[float, float], tuple[float, float], str] | None = None
        self._next_report = start

    @classmethod
    def for_fleet(cls, options: FleetOptions, device_id: str, rng: random.Random, now: float) -> SimDevice:
        faults = options.fault_rates
        slow = rng.random() < faults.get("slow_transition", 0.0)
        return cls(
            seed=rng.getrandbits(64),
            rate=options.rate,
            start=now,
            power=rng.choice(("on", "off", "off")),
            brightness_pct=rng.choice((30, 50, 80, 100)),
            color_temp_k=rng.choice((2200, 2700, 3000, 4000)),
            failure_probability=faults.get("bulb_failure", 0.0),
            slow_factor=3.0 if slow else 1.0,
        )

    @property
    def readings(self) -> JSON:
        return {
            "power": self.power,
            "brightness_pct": max(1, min(100, round(self.level))),
            "color_temp_k": max(2000, min(6500, round(self.kelvin))),
        }

    @property
    def wake_at(self) -> float:
        pending = [self.telemetry_at]
        if self.transition is not None:
            pending.append(min(self._next_report, self.transition[1]))
        if self.failed_until is not None:
            pending.append(self.failed_until)
        return min(pending)

    def _restore(self, reported: JSON) -> None:
        if reported.get("power") in ("on", "off"):
            self.power = reported["power"]
        if isinstance(reported.get("brightness_pct"), int | float):
            self.level = self.remembered = float(reported["brightness_pct"])
        if isinstance(reported.get("color_temp_k"), int | float):
            self.kelvin = float(reported["color_temp_k"])
        self.transition = None

    def _command(self, name: str, params: JSON, now: float) -> tuple[bool, str]:
        params = light_type.TYPE.validate(name, params)  # the bulb holds to the same limits
        if self.failed_until is not None:
            return False, "bulb_failed"
        if self.rng.random() < self.failure_probability:
            self.failed_until = now + self.replace_s
            self.power, self.transition = "off", None
            return False, "bulb_failed"
        duration = float(params.get("transition_s", 0.0)) * self.slow_factor
        if name == "turn_off":
            if self.power == "on":
                self.remembered = self.level
                self._begin(now, duration, (1.0, self.kelvin), "off")
            return True, ""
        target = float(params.get("brightness_pct", self.remembered))
        kelvin = float(params.get("color_temp_k", self.kelvin))
        if self.power == "off":
            self.power, self.level = "on", 1.0
        self.remembered = target
        self._begin(now, duration, (target, kelvin), "on")
        return True, ""

    def _begin(self, now: float, duration: float, to: tuple[float, float], power_after: str) -> None:
        self.transition = (now, now + duration, (self.level, self.kelvin), to, power_after)
        self._next_report = now + REPORT_EVERY_S
        self._evolve(now, 0.0)

    def _evolve(self, t: float, dt: float) -> None:
        end = t + dt
        if self.failed_until is not None and self.failed_until <= end:
            self.failed_until = None  # replaced: a new bulb, off, at the level it was set to
            self.level = self.remembered
        if self.transition is None:
            return
        begin, finish, (level0, kelvin0), (level1, kelvin1), power_after = self.transition
        if end >= finish:
            self.transition = None
            self.level, self.kelvin, self.power = level1, kelvin1, power_after
            if power_after == "off":
                self.level = self.remembered
            return
        share = (end - begin) / (finish - begin)
        self.level = level0 + (level1 - level0) * share
        self.kelvin = kelvin0 + (kelvin1 - kelvin0) * share
        while self._next_report <= end:
            self._next_report += REPORT_EVERY_S


MODEL = SimLight
