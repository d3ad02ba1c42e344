"""The simulated light: transitions reported on the way, a turn_off that fades and remembers its level,
and its faults (a bulb that burns out, transitions slower than asked)."""

from __future__ import annotations

import random

import pytest

from hearth_simulator.devices.sim_light import SimLight
from hearth_simulator.fleet import FleetOptions

pytestmark = pytest.mark.unit


def run(model: SimLight, until: float, every: float = 0.5) -> list[dict[str, object]]:
    """Step the model to ``until``; what it reported on the way (telemetry off: rate tiny)."""
    said = []
    t = model.clock
    while t < until:
        t = min(until, t + every)
        report = model.step(t)
        if report is not None:
            said.append(report)
    return said


def test_a_transition_reports_the_way_there_and_ends_where_asked() -> None:
    model = SimLight(seed=1, rate=1 / 3600, power="off", brightness_pct=50)
    run(model, 5.0)
    assert model.apply_command("turn_on", {"brightness_pct": 90, "transition_s": 4}, 10.0) == (True, "")
    reports = run(model, 20.0)
    levels = [level for r in reports if isinstance(level := r.get("brightness_pct"), int)]
    assert len(levels) >= 3, reports  # about one a second on the way
    assert levels == sorted(levels) and 1 < levels[0] < 90
    assert levels[-1] == 90 and model.state["power"] == "on"


def test_turn_off_fades_then_remembers_the_level() -> None:
    model = SimLight(seed=2, rate=1 / 3600, power="on", brightness_pct=70)
    model.apply_command("turn_off", {"transition_s": 2}, 1.0)
    run(model, 2.0)
    assert model.state["power"] == "on" and model.state["brightness_pct"] < 70  # still fading
    run(model, 4.0)
    assert model.state["power"] == "off"
    model.apply_command("turn_on", {}, 5.0)  # no transition: at once, at the remembered level
    assert (model.state["power"], model.state["brightness_pct"]) == ("on", 70)


def test_a_burnt_out_bulb_fails_commands_until_it_is_replaced() -> None:
    model = SimLight(seed=3, rate=1 / 3600, power="on", failure_probability=1.0, replace_s=60.0)
    assert model.apply_command("turn_on", {"brightness_pct": 20}, 1.0) == (False, "bulb_failed")
    assert model.state["power"] == "off"
    model.failure_probability = 0.0
    assert model.apply_command("turn_on", {}, 30.0) == (False, "bulb_failed")
    run(model, 62.0)
    assert model.apply_command("turn_on", {"brightness_pct": 20}, 62.0) == (True, "")


def test_a_slow_bulb_takes_longer_than_asked() -> None:
    model = SimLight(seed=4, rate=1 / 3600, power="on", brightness_pct=10, slow_factor=3.0)
    model.apply_command("turn_on", {"brightness_pct": 100, "transition_s": 2}, 0.0)
    run(model, 4.0)
    assert model.state["brightness_pct"] < 100
    run(model, 6.5)
    assert model.state["brightness_pct"] == 100


def test_the_fleet_sets_the_faults_from_its_options() -> None:
    options = FleetOptions(fault_rates={"bulb_failure": 0.5, "slow_transition": 1.0})
    model = SimLight.for_fleet(options, "li-1", random.Random(1), 0.0)
    assert isinstance(model, SimLight)
    assert (model.failure_probability, model.slow_factor) == (0.5, 3.0)
    plain = SimLight.for_fleet(FleetOptions(), "li-1", random.Random(1), 0.0)
    assert isinstance(plain, SimLight)
    assert (plain.failure_probability, plain.slow_factor) == (0.0, 1.0)
