"""The room-response learner on a synthetic room (Newton's cooling and a heater, a thermostat with a
band, readings rounded to 0.1 °C every 15 minutes, ``hvac_action`` as it changes): the fit finds the
heater's rate and the room's loss; and the preheat lead from a fit, against the closed form."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from hearth_shared.domain.room_response import (
    CAP_S,
    Reading,
    ResponseFit,
    RoomResponse,
    fit_room,
    preheat_lead,
    response_samples,
)

pytestmark = pytest.mark.unit

START = datetime(2026, 1, 5, tzinfo=UTC)


def simulated_room(days: int, *, heat_c_per_h: float, insulation_h: float, seed: int = 3) -> list[Reading]:
    """A room heated to 21 °C from 06:00 to 22:00 and to 17 °C at night, outdoors between -2 and 8 °C
    over the day; physics every minute, readings as a thermostat journals them."""
    rng = random.Random(seed)
    readings: list[Reading] = []
    indoor, heating, last_reported = 18.0, False, None
    for minute in range(days * 24 * 60):
        at = START + timedelta(minutes=minute)
        hour = (minute / 60) % 24
        outdoor = 3.0 + 5.0 * math.sin((hour - 10) / 24 * 2 * math.pi)
        target = 21.0 if 6 <= hour < 22 else 17.0
        if heating and indoor > target + 0.3:
            heating = False
        elif not heating and indoor < target - 0.3:
            heating = True
        action = "heating" if heating else "idle"
        if action != last_reported:
            readings.append(Reading(at=at, hvac_action=action))
            last_reported = action
        indoor += ((outdoor - indoor) / insulation_h + (heat_c_per_h if heating else 0.0)) / 60
        if minute % 15 == 0:
            reading = round(indoor + rng.gauss(0, 0.03), 1)
            readings.append(Reading(at=at, ambient_c=reading, outdoor_c=round(outdoor, 1)))
    return readings


def test_the_fit_finds_the_heaters_rate_and_the_rooms_loss() -> None:
    readings = simulated_room(21, heat_c_per_h=4.0, insulation_h=8.0)
    samples = response_samples(readings)
    assert {s.action for s in samples} == {"heating", "idle"}
    response = fit_room(samples, readings[0].at, readings[-1].at)
    assert response is not None and response.heating is not None and response.idle is not None
    assert response.idle.per_degree_per_h == pytest.approx(-1 / 8.0, rel=0.2)
    assert response.idle.base_c_per_h == pytest.approx(0.0, abs=0.3)
    assert response.heating.per_degree_per_h == response.idle.per_degree_per_h  # one loss per room
    assert response.heating.base_c_per_h == pytest.approx(4.0, rel=0.15)
    assert response.cooling is None  # never cooled: nothing to fit
    assert response.heating.samples >= 20


def test_an_interval_across_an_action_change_is_no_sample() -> None:
    t = START
    readings = [
        Reading(at=t, ambient_c=18.0, outdoor_c=5.0, hvac_action="idle"),
        Reading(at=t + timedelta(minutes=10), hvac_action="heating"),
        Reading(at=t + timedelta(minutes=15), ambient_c=18.4),
        Reading(at=t + timedelta(minutes=30), ambient_c=19.4),
    ]
    (sample,) = response_samples(readings)
    assert sample.action == "heating"
    assert sample.rate_c_per_h == pytest.approx(4.0)
    assert sample.delta_c == pytest.approx(18.9 - 5.0)


def test_too_few_samples_fit_nothing() -> None:
    assert fit_room([], START, START) is None


FIT = RoomResponse(
    heating=ResponseFit(base_c_per_h=4.0, per_degree_per_h=-0.125, samples=100, rmse_c_per_h=0.3),
    fitted_from=START,
    fitted_to=START,
)


def closed_form_s(indoor: float, outdoor: float, target: float, base: float, per_degree: float) -> float:
    """Time to reach ``target`` under rate = base + per_degree * (T - outdoor)."""
    equilibrium = outdoor - base / per_degree
    return math.log((indoor - equilibrium) / (target - equilibrium)) / -per_degree * 3600


def test_the_lead_is_the_time_the_fitted_room_takes_to_reach_the_target() -> None:
    lead = preheat_lead(FIT, 17.0, 0.0, 21.0)
    assert lead.reason == "reaches_target"
    expected = closed_form_s(17.0, 0.0, 21.0, 4.0, -0.125)
    assert abs(lead.lead_s - expected) <= 60  # minute steps
    assert lead.rate_c_per_h == pytest.approx(4.0 - 0.125 * 17.0)
    colder = preheat_lead(FIT, 17.0, -10.0, 21.0)
    assert colder.lead_s > lead.lead_s  # a colder night, an earlier start


def test_the_lead_is_capped_and_says_why_when_it_is_not_needed_or_not_known() -> None:
    slow = preheat_lead(FIT, 12.0, 0.0, 21.0, cap_s=3600)  # needs more than the hour allowed
    assert (slow.lead_s, slow.reason) == (3600, "capped")
    needed = closed_form_s(12.0, 0.0, 21.0, 4.0, -0.125)  # what it needed, said beside the cap
    assert slow.needed_s is not None and 0 <= slow.needed_s - needed <= 60
    assert slow.reachable_c is None
    warm = preheat_lead(FIT, 21.5, 0.0, 21.0)
    assert (warm.lead_s, warm.reason) == (0, "warm_enough")
    assert preheat_lead(None, 17.0, 0.0, 21.0).reason == "no_response"
    assert preheat_lead(FIT, None, 0.0, 21.0).reason == "no_reading"


def test_a_room_that_levels_off_below_the_target_is_unreachable_and_starts_at_the_cap() -> None:
    # 4 °C/h against a loss of 1/8 per °C levels off 32 °C above outdoors: 12 °C at -20 °C
    cold = preheat_lead(FIT, 11.0, -20.0, 21.0)
    assert (cold.lead_s, cold.reason, cold.needed_s) == (CAP_S, "unreachable", None)
    assert cold.reachable_c == pytest.approx(12.0)
    above_the_level = preheat_lead(FIT, 17.0, -20.0, 21.0)  # warmer than it can hold: it cools
    assert (above_the_level.lead_s, above_the_level.reason) == (CAP_S, "unreachable")
    assert above_the_level.rate_c_per_h is not None and above_the_level.rate_c_per_h < 0
    at_the_level = preheat_lead(FIT, 17.0, -11.0, 21.0)  # levels off at exactly 21 °C: never there
    assert at_the_level.reason == "unreachable"
