"""Each room's physics, learned from its thermostat's reports, and the preheat lead it gives.

Pure (no clock, no I/O, no Spark): the learning job (``hearth_analytics.jobs.learn``) hands one device's
reports here; the automations scheduler asks ``preheat_lead`` how early a transition must start.

The model is Newton's law of cooling with a heater: the room's temperature moves at

    rate (°C per hour) = base + per_degree * (indoor - outdoor)

where ``per_degree`` is negative (a room warmer than outside loses heat in proportion to the difference:
``-1 / time constant``) and ``base`` is what the equipment adds (0 while idle, the heater's rate while
heating, minus the cooler's while cooling). That is the response the issue asks for, °C per hour against
the indoor-outdoor difference.

* **Samples** (``response_samples``): between two consecutive ``ambient_c`` readings with no
  ``hvac_action`` change in between, 5 to 60 minutes apart: the action then, the difference (the mean of
  the two readings minus the latest ``outdoor_c``) and the rate. An interval across an action change is
  left out (it would mix two responses). Readings are 0.1 °C steps, so one rate is coarse; a fit over
  weeks of them is not.
* **Fit** (``fit_room``): least squares. The loss (``per_degree``) is the room's, whatever the equipment
  does, so it is fitted once on the idle periods (most of the time, and the widest range of differences)
  and the heating and cooling fits keep it, each adding its own constant rate (the mean of what the loss
  does not explain). Without enough idle samples, each action is fitted on its own. A fit needs
  ``min_samples`` (20) samples and a spread of differences, else it is left out (None).
* **Lead** (``preheat_lead``): the heating fit is run forward minute by minute from the indoor temperature
  now, the outdoor held at its value now, until the target is reached; the lead is that time, at most
  ``cap_s`` (4 h by default: the operator's ``HEARTH_AUTOMATIONS_PREHEAT_MAX_S``, a bound on how long a
  heater may run before a transition, not a guess at rooms). Each answer says why: ``reaches_target``,
  ``capped`` (the room needs longer: ``needed_s`` says how long), ``unreachable`` (no lead gets there:
  the fit's room levels off at ``reachable_c``, at or below the target, at this outdoor temperature; it
  still starts at the cap, to be as warm as it can), ``warm_enough`` (no lead needed), ``no_response``
  (nothing learned yet), ``no_reading`` (indoor or outdoor unknown).

  Why the cap binds, measured (``hearth bench learn --homes 10``, held out 13-27 November 2026): every
  minute of MissTime left with preheat was in preheats at the cap, and none was the fit's. The fits
  matched the simulated rooms' heater and loss within 2 %, the fitted lead matched the lead from the true
  physics (median ratio 1.00, 0.94-1.22) wherever the room could make it, and the 157 preheats that
  reached their target left no MissTime. Of 226 preheats, 69 were at the 3 h cap: 36 needed longer (a
  2.5-4 °C/h heater against a night near 0 °C), 33 could not reach the target at all that night (the
  room levels off at outdoor + heater x time constant, below it). A longer cap buys MissTime with
  heating hours: 3 h cut MissTime by 70.7 % at 1.037x the household's own heating hours, 6 h by 79.2 %
  at 1.049x (both through the whole bench); 8 h by 81.5 % at 1.061x (the same replay in plain Python;
  the true physics in place of the fits gave the same figures at each cap). So the cap is the
  household's trade between a warm room and heating hours (a schedule's ``preheat_max_min``), shown on
  each run (``needed_s``, ``reachable_c``), not a fault of the lead.

  The default, ``CAP_S``, from the bench at full size (1,000 homes, 6 weeks, 2 held out; 2026-11-28):
  3 h cut MissTime by 79.99 % at 1.039x the household's heating hours, 4 h by 83.3 % at 1.044x. 4 h keeps
  both of issue 22's goals (a cut of at least 80 %, at most 1.05x the heating), 3 h misses the first;
  a longer one spends the heating bound for little (6 h: 1.049x on the small bench above). The same
  order as the thermostats that start early by themselves (Honeywell's recovery example: 04:00 for
  07:00).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import msgspec

MIN_SAMPLES = 20
MIN_GAP_S, MAX_GAP_S = 300.0, 3600.0
CAP_S = 4 * 3600  # the deployment's default longest preheat (module docstring)
STEP_S = 60
IDLE_ACTIONS = ("idle", "off")


@dataclass(frozen=True)
class Reading:
    """One state report of a thermostat, the keys this module reads (None: not in that report)."""

    at: datetime
    ambient_c: float | None = None
    outdoor_c: float | None = None
    hvac_action: str | None = None


@dataclass(frozen=True)
class Sample:
    action: str  # "heating", "cooling" or "idle" (idle and off alike)
    delta_c: float  # indoor - outdoor
    rate_c_per_h: float


class ResponseFit(msgspec.Struct, frozen=True, kw_only=True):
    base_c_per_h: float  # the rate at no indoor-outdoor difference: what the equipment adds
    per_degree_per_h: float  # the rate's change per °C of indoor-outdoor difference (negative: loss)
    samples: int
    rmse_c_per_h: float

    def rate(self, indoor_c: float, outdoor_c: float) -> float:
        return self.base_c_per_h + self.per_degree_per_h * (indoor_c - outdoor_c)


class RoomResponse(msgspec.Struct, frozen=True, kw_only=True):
    """A room's learned response per action, and the device times of the readings it was fitted on."""

    heating: ResponseFit | None = None
    cooling: ResponseFit | None = None
    idle: ResponseFit | None = None
    fitted_from: datetime
    fitted_to: datetime


class Preheat(msgspec.Struct, frozen=True, kw_only=True):
    """How early a transition starts, and why (what its run records)."""

    lead_s: int
    reason: str  # reaches_target | capped | unreachable | warm_enough | no_response | no_reading
    target_c: float
    indoor_c: float | None = None
    outdoor_c: float | None = None
    rate_c_per_h: float | None = None  # the heating rate at the start
    response_id: uuid.UUID | None = None  # the room.response_fitted fact it was computed from
    needed_s: int | None = None  # capped: the lead the room needed, beyond the cap
    reachable_c: float | None = None  # unreachable: the temperature the room levels off at, heating


def _action(action: str) -> str:
    return "idle" if action in IDLE_ACTIONS else action


def response_samples(readings: Iterable[Reading]) -> list[Sample]:
    """Rate samples from one device's readings, in device-time order (module docstring)."""
    samples: list[Sample] = []
    action: str | None = None
    outdoor: float | None = None
    anchor: tuple[datetime, float, str, float] | None = None  # (at, ambient, action, outdoor) since a change
    for r in sorted(readings, key=lambda r: r.at):
        if r.hvac_action is not None and r.hvac_action != action:
            action, anchor = r.hvac_action, None
        if r.outdoor_c is not None:
            outdoor = r.outdoor_c
        if r.ambient_c is None or action is None or outdoor is None:
            continue
        if anchor is not None:
            gap = (r.at - anchor[0]).total_seconds()
            if MIN_GAP_S <= gap <= MAX_GAP_S:
                delta = (anchor[1] + r.ambient_c) / 2 - anchor[3]
                samples.append(Sample(_action(action), delta, (r.ambient_c - anchor[1]) * 3600.0 / gap))
            elif gap < MIN_GAP_S:
                continue  # too close to tell a rate: keep the older anchor
        anchor = (r.at, r.ambient_c, action, outdoor)
    return samples


def _least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx < 1e-6 * n:
        return None  # no spread of differences: the slope cannot be told
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


def _fit(samples: Sequence[Sample], per_degree: float | None, min_samples: int) -> ResponseFit | None:
    if len(samples) < min_samples:
        return None
    xs, ys = [s.delta_c for s in samples], [s.rate_c_per_h for s in samples]
    if per_degree is None:
        found = _least_squares(xs, ys)
        if found is None:
            return None
        base, per_degree = found
    else:
        base = sum(y - per_degree * x for x, y in zip(xs, ys, strict=True)) / len(xs)
    rmse = math.sqrt(sum((y - base - per_degree * x) ** 2 for x, y in zip(xs, ys, strict=True)) / len(xs))
    return ResponseFit(
        base_c_per_h=round(base, 4),
        per_degree_per_h=round(per_degree, 5),
        samples=len(samples),
        rmse_c_per_h=round(rmse, 4),
    )


def fit_room(
    samples: Sequence[Sample], fitted_from: datetime, fitted_to: datetime, *, min_samples: int = MIN_SAMPLES
) -> RoomResponse | None:
    """The room's response from its samples (None when no action has enough of them)."""
    by_action: dict[str, list[Sample]] = {}
    for s in samples:
        by_action.setdefault(s.action, []).append(s)
    idle = _fit(by_action.get("idle", []), None, min_samples)
    loss = idle.per_degree_per_h if idle is not None and idle.per_degree_per_h < 0 else None
    heating = _fit(by_action.get("heating", []), loss, min_samples)
    cooling = _fit(by_action.get("cooling", []), loss, min_samples)
    if heating is None and cooling is None and idle is None:
        return None
    return RoomResponse(
        heating=heating, cooling=cooling, idle=idle, fitted_from=fitted_from, fitted_to=fitted_to
    )


def preheat_lead(
    response: RoomResponse | None,
    indoor_c: float | None,
    outdoor_c: float | None,
    target_c: float,
    *,
    cap_s: int = CAP_S,
    response_id: uuid.UUID | None = None,
) -> Preheat:
    """How long before a transition to ``target_c`` heating must start (module docstring)."""

    def answer(
        lead_s: int,
        reason: str,
        rate: float | None = None,
        needed_s: int | None = None,
        reachable_c: float | None = None,
    ) -> Preheat:
        return Preheat(
            lead_s=lead_s, reason=reason, target_c=target_c, indoor_c=indoor_c, outdoor_c=outdoor_c,
            rate_c_per_h=None if rate is None else round(rate, 3), response_id=response_id,
            needed_s=needed_s, reachable_c=None if reachable_c is None else round(reachable_c, 1),
        )  # fmt: skip

    if response is None or response.heating is None:
        return answer(0, "no_response")
    if indoor_c is None or outdoor_c is None:
        return answer(0, "no_reading")
    fit = response.heating
    start_rate = fit.rate(indoor_c, outdoor_c)
    if indoor_c >= target_c:
        return answer(0, "warm_enough", start_rate)
    temperature, elapsed, stalled = indoor_c, 0, False
    while elapsed < cap_s and not stalled:
        rate = fit.rate(temperature, outdoor_c)
        stalled = rate <= 0  # it gets no warmer: beyond any lead
        temperature += max(rate, 0.0) * STEP_S / 3600.0
        elapsed += STEP_S
        if temperature >= target_c:
            return answer(elapsed, "reaches_target", start_rate)
    level = levels_off_at(fit, outdoor_c)
    if stalled or (level is not None and level <= target_c):
        return answer(cap_s, "unreachable", start_rate, reachable_c=level)
    needed = None if level is None else _time_to(fit, indoor_c, target_c, level)  # None: no loss learned
    return answer(cap_s, "capped", start_rate, needed_s=needed)


def levels_off_at(fit: ResponseFit, outdoor_c: float) -> float | None:
    """The temperature the room heats toward at ``outdoor_c``, where its loss equals the heater (None: the
    fit has no loss, so no level)."""
    if fit.per_degree_per_h >= 0:
        return None
    return outdoor_c - fit.base_c_per_h / fit.per_degree_per_h


def _time_to(fit: ResponseFit, indoor_c: float, target_c: float, level: float) -> int:
    """Seconds from ``indoor_c`` to ``target_c`` under the fit (Newton's law: closed form, rounded up to
    the minute as the lead's steps are), ``target_c`` below ``level``."""
    hours = math.log((level - indoor_c) / (level - target_c)) / -fit.per_degree_per_h
    return math.ceil(hours * 3600.0 / STEP_S) * STEP_S
