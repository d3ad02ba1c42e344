"""The simulated thermostat (``hearth_shared.domain.thermostat``)."""

from __future__ import annotations

import math
import random

from hearth_shared.domain import thermostat as thermostat_type
from hearth_simulator.options import FleetOptions
from hearth_simulator.outdoor import Outdoor
from hearth_simulator.sim_device import JSON, SimDevice


class SimThermostat(SimDevice):
    """A room with a heater and an air conditioner, leaking heat to an outside that follows the day.

    The room moves toward the outside temperature with time constant ``insulation_h``; heating adds
    ``heat_c_per_h``, cooling removes ``cool_c_per_h``. The thermostat starts heating below
    ``target - HYSTERESIS_C`` and stops at the target (cooling mirrors it), so it cycles just under or
    over its target. ``drift_c_per_h`` makes a faulty sensor: the reported ``ambient_c`` drifts away from
    the room's real temperature, which the control loop (on a good sensor) keeps at the target.

    So a learner can fit a room's response from the journal alone: while ``hvac_action`` is ``heating``
    the room warms at ``heat_c_per_h - (ambient - outdoor) / insulation_h`` °C an hour, while ``idle``
    or ``off`` it moves at ``-(ambient - outdoor) / insulation_h``; ``hvac_action`` is reported as soon
    as it changes (a discrete key), ``ambient_c`` and ``outdoor_c`` with each telemetry report.

    The outside is an ``Outdoor`` (outdoor.py: day and season in the home's time zone); the thermostat
    reports it as ``outdoor_c`` and its zone as ``time_zone``, as a thermostat with a weather feed
    would. A change made on the device's own panel (``set_on_panel``: the household's hand, not a
    command) sets ``target_c`` and counts one more ``panel_changes``, a discrete key, so the report
    that carries a manual change always carries the new count too: the journal tells a manual change
    (``panel_changes`` in the same fact) from one a command made (``target_c`` alone, after the
    command's facts).
    """

    device_type = thermostat_type.TYPE.name
    discrete_keys = ("hvac_mode", "hvac_action", "target_c", "target_low_c", "target_high_c", "panel_changes")
    demo_names = ("Living room", "Bedroom", "Kitchen")
    firmware = "3.2.0"

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
        outdoor: Outdoor | None = None,
    ) -> None:
        super().__init__(seed=seed, rate=rate, start=start)
        self.ambient = ambient_c  # the room's real temperature
        self.humidity = humidity_pct
        self.hvac_mode = hvac_mode
        self.target_c = target_c
        self.target_low_c = target_low_c
        self.target_high_c = target_high_c
        self.auto_uses_pair = False  # in auto: the low/high pair if that was set last, else target_c
        self.outdoor = outdoor or Outdoor(mean_c=outside_mean_c, day_swing_c=outside_swing_c)
        self.panel_changes = 0  # targets set by hand on the device
        self.insulation_s = insulation_h * 3600.0
        self.heat_c_per_s = heat_c_per_h / 3600.0
        self.cool_c_per_s = cool_c_per_h / 3600.0
        self.drift_c_per_s = drift_c_per_h / 3600.0
        self.drift_c = 0.0  # how far the sensor has drifted from the real temperature
        self.reading_c = ambient_c
        self.hvac_action = "off"
        self.hvac_action = self._next_action()

    @classmethod
    def for_fleet(cls, options: FleetOptions, device_id: str, rng: random.Random, now: float) -> SimDevice:
        """Drifting (``options.drifting_ids`` or a share ``drifting_fraction``): a faulty sensor."""
        drifting = device_id in options.drifting_ids or rng.random() < options.drifting_fraction
        return cls(
            seed=rng.getrandbits(64),
            rate=options.rate,
            start=now,
            ambient_c=rng.uniform(16.0, 24.0),
            humidity_pct=rng.uniform(35.0, 55.0),
            hvac_mode=rng.choice(("heat", "heat", "heat", "auto", "cool", "off")),
            target_c=rng.choice((19.5, 20.0, 20.5, 21.0, 21.5, 22.0)),
            outside_mean_c=rng.uniform(0.0, 25.0),
            outside_swing_c=rng.uniform(3.0, 7.0),
            drift_c_per_h=_drift_c_per_h(options, rng) if drifting else 0.0,
        )

    def drift(self, per_h: float) -> None:
        """A drifting firmware: the reading drifts ``per_h`` °C an hour from now on (0.0: no more)."""
        self.drift_c_per_s = per_h / 3600.0

    @property
    def readings(self) -> JSON:
        return {
            "ambient_c": round(self.reading_c, 1),
            "humidity_pct": round(self.humidity, 1),
            "hvac_mode": self.hvac_mode,
            "hvac_action": self.hvac_action,
            "target_c": self.target_c,
            "target_low_c": self.target_low_c,
            "target_high_c": self.target_high_c,
            "outdoor_c": round(self.outside_c(self.clock), 1),
            "time_zone": self.outdoor.time_zone,
            "panel_changes": self.panel_changes,
        }

    def outside_c(self, t: float) -> float:
        """The outside temperature at time ``t`` (by default coldest at 04:00, warmest at 16:00 UTC)."""
        return self.outdoor.temperature_c(t)

    def set_on_panel(self, target_c: float, now: float) -> None:
        """Someone at home sets the target on the device itself (not a command): reported at once, with
        one more ``panel_changes``."""
        self._advance(now)
        self.target_c = target_c
        self.auto_uses_pair = False
        self.panel_changes += 1
        self.hvac_action = self._next_action()

    def _restore(self, reported: JSON) -> None:
        if reported.get("hvac_mode") in thermostat_type.MODES:
            self.hvac_mode = reported["hvac_mode"]
        for key in ("target_c", "target_low_c", "target_high_c"):
            if isinstance(reported.get(key), int | float):
                setattr(self, key, float(reported[key]))
        if isinstance(reported.get("ambient_c"), int | float):
            self.ambient = self.reading_c = float(reported["ambient_c"])
        if isinstance(reported.get("panel_changes"), int):
            self.panel_changes = reported["panel_changes"]
        if isinstance(reported.get("humidity_pct"), int | float):
            self.humidity = float(reported["humidity_pct"])
        self.hvac_action = self._next_action()

    def _command(self, name: str, params: JSON, now: float) -> tuple[bool, str]:
        params = thermostat_type.TYPE.validate(name, params)  # the device holds to the same limits
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


def _drift_c_per_h(options: FleetOptions, rng: random.Random) -> float:
    if options.drift_c_per_h is not None:
        return options.drift_c_per_h
    return rng.choice((-1.0, 1.0)) * rng.uniform(1.0, 3.0)


MODEL = SimThermostat
