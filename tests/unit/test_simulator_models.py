"""The simulated devices: thermal model, lock timing and jams, sensor drift, determinism."""

from __future__ import annotations

from typing import Any

import pytest

from hearth_simulator.devices.sim_lock import SimLock
from hearth_simulator.devices.sim_thermostat import SimThermostat
from hearth_simulator.sim_device import SimDevice

pytestmark = pytest.mark.unit

HOUR = 3600.0


def run(
    model: SimDevice, start: float, until: float, every: float = 1.0
) -> list[tuple[float, dict[str, Any]]]:
    """Step ``model`` every ``every`` s over ``(start, until]``; the reports it made, with their times."""
    reports = []
    steps = round((until - start) / every)
    for i in range(1, steps + 1):
        now = start + i * every
        report = model.step(now)
        if report is not None:
            reports.append((now, report))
    return reports


def steady_weather(**overrides: Any) -> SimThermostat:
    """A thermostat with a constant outside temperature (no daily swing), so the physics is easy to check."""
    params: dict[str, Any] = {"seed": 1, "rate": 1 / 60, "outside_swing_c": 0.0, **overrides}
    return SimThermostat(**params)


# ------------------------------------------------------------------------------------------ thermostat


def test_heating_brings_a_cold_room_to_its_target_and_holds_it_there() -> None:
    model = steady_weather(ambient_c=15.0, target_c=21.0, hvac_mode="heat", outside_mean_c=5.0)
    assert model.state["hvac_action"] == "heating"

    reports = run(model, 0, 1 * HOUR, every=60)
    assert 17.5 < model.ambient < 20.5, "heats at a few degrees per hour, not instantly"

    reports += run(model, 1 * HOUR, 6 * HOUR, every=60)
    later = [r["ambient_c"] for t, r in reports if t > 4 * HOUR and "ambient_c" in r]
    assert later and all(20.3 <= a <= 21.2 for a in later), later
    actions = {r["hvac_action"] for t, r in reports if t > 4 * HOUR}
    assert actions == {"heating", "idle"}, "it cycles around the target with its hysteresis"


def test_cooling_brings_a_hot_room_down_to_its_target() -> None:
    model = steady_weather(ambient_c=29.0, target_c=22.0, hvac_mode="cool", outside_mean_c=32.0)
    assert model.state["hvac_action"] == "cooling"

    run(model, 0, 1 * HOUR, every=60)
    assert 25.0 < model.ambient < 28.0
    reports = run(model, 1 * HOUR, 8 * HOUR, every=60)
    assert 21.4 <= model.ambient <= 23.0
    assert "idle" in {r["hvac_action"] for _, r in reports}


def test_switched_off_the_room_drifts_to_the_outside_temperature() -> None:
    model = steady_weather(ambient_c=21.0, hvac_mode="off", outside_mean_c=8.0)
    run(model, 0, 4 * HOUR, every=60)
    after_4h = model.ambient
    run(model, 4 * HOUR, 48 * HOUR, every=60)

    assert 12.0 < after_4h < 20.0
    assert 8.0 <= model.ambient < 8.5
    assert model.state["hvac_action"] == "off"


def test_the_outside_follows_the_time_of_day() -> None:
    model = SimThermostat(outside_mean_c=10.0, outside_swing_c=5.0)
    assert model.outside_c(4 * HOUR) == pytest.approx(5.0)
    assert model.outside_c(16 * HOUR) == pytest.approx(15.0)
    assert model.outside_c(24 * HOUR + 4 * HOUR) == pytest.approx(5.0)


def test_a_command_is_reported_at_once_and_telemetry_at_the_configured_rate() -> None:
    model = SimThermostat(seed=3, rate=2.0, ambient_c=20.0, target_c=20.0, hvac_mode="heat")
    reports = run(model, 0, 10, every=0.05)
    full = [r for _, r in reports if "ambient_c" in r]
    assert 19 <= len(full) <= 21, "2 reports/s over 10 s"
    assert set(full[0]) >= {"ambient_c", "humidity_pct", "hvac_action", "hvac_mode", "target_c"}

    assert model.apply_command("set_target_temperature", {"target_c": 23.5}, now=10.01) == (True, "")
    change = model.step(10.02)
    assert change is not None and change["target_c"] == 23.5 and change["hvac_action"] == "heating"
    assert "ambient_c" not in change, "only what changed, before the next telemetry is due"
    assert model.step(10.03) is None, "nothing new to say"


def test_thermostat_commands_follow_the_device_type_rules() -> None:
    model = SimThermostat()
    assert model.apply_command("set_hvac_mode", {"mode": "cool"}, now=1) == (True, "")
    assert model.state["hvac_mode"] == "cool"
    assert model.apply_command("set_target_temperature", {"target_c": 50.0}, now=2) == (False, "out_of_range")
    assert model.apply_command("open_windows", {}, now=3) == (False, "unknown_command")
    ok = model.apply_command("set_target_temperature", {"target_low_c": 18.0, "target_high_c": 25.0}, now=4)
    assert ok == (True, "")
    assert (model.state["target_low_c"], model.state["target_high_c"]) == (18.0, 25.0)


def test_a_drifting_thermostat_reports_a_reading_that_leaves_the_physics_behind() -> None:
    healthy = steady_weather(seed=7, ambient_c=20.0, target_c=21.0, outside_mean_c=8.0)
    drifting = steady_weather(seed=7, ambient_c=20.0, target_c=21.0, outside_mean_c=8.0, drift_c_per_h=2.0)
    run(healthy, 0, 6 * HOUR, every=60)
    run(drifting, 0, 6 * HOUR, every=60)

    assert drifting.ambient == pytest.approx(healthy.ambient), "the room itself is the same"
    assert drifting.state["ambient_c"] - healthy.state["ambient_c"] == pytest.approx(12.0, abs=0.3)
    assert abs(healthy.state["ambient_c"] - healthy.ambient) < 0.2


def test_same_seed_same_readings_other_seed_other_readings() -> None:
    def readings(seed: int) -> list[Any]:
        model = SimThermostat(seed=seed, rate=1.0, ambient_c=18.0)
        model.apply_command("set_target_temperature", {"target_c": 22.0}, now=30)
        return run(model, 0, 2 * HOUR, every=1.0)

    assert readings(42) == readings(42)
    assert readings(42) != readings(43)


# ------------------------------------------------------------------------------------------------ lock


def after_first_telemetry(lock: SimLock) -> float:
    """Step the lock through its first telemetry report; the time, with a minute until the next one."""
    t0 = lock.telemetry_at
    assert lock.step(t0) == lock.state
    return t0


def test_lock_and_unlock_take_a_second_or_two() -> None:
    lock = SimLock(seed=5, rate=1 / 60, lock_state="unlocked", door_opens_per_h=0.0)
    t0 = after_first_telemetry(lock)
    assert lock.apply_command("lock", {}, now=t0 + 1) == (True, "")
    assert lock.state["lock_state"] == "locking"
    assert lock.step(t0 + 1.1) == {"lock_state": "locking"}
    assert lock.step(t0 + 1.9) is None, "still moving"
    assert t0 + 2 <= lock.wake_at <= t0 + 3, "it wakes when the bolt is home"
    assert lock.step(t0 + 3) == {"lock_state": "locked"}

    assert lock.apply_command("lock", {}, now=t0 + 4) == (True, ""), "already locked: nothing to do"
    assert lock.state["lock_state"] == "locked"
    assert lock.apply_command("unlock", {}, now=t0 + 5) == (True, "")
    assert lock.state["lock_state"] == "unlocking"
    assert lock.step(t0 + 7) == {"lock_state": "unlocked"}


def test_a_lock_that_always_jams_fails_the_command_and_is_freed_later() -> None:
    lock = SimLock(seed=1, rate=1 / 600, jam_probability=1.0, jam_clear_s=120.0, door_opens_per_h=0.0)
    t0 = after_first_telemetry(lock)
    assert lock.apply_command("unlock", {}, now=t0 + 10) == (False, "device_jammed")
    assert lock.step(t0 + 10.5) == {"lock_state": "jammed"}
    assert lock.apply_command("lock", {}, now=t0 + 20) == (False, "device_jammed"), "jammed refuses all"
    assert lock.step(t0 + 129) is None
    assert lock.step(t0 + 131) == {"lock_state": "locked"}, "freed by hand, back where it was"


def test_a_lock_never_jams_with_probability_zero() -> None:
    lock = SimLock(seed=2, jam_probability=0.0, door_opens_per_h=0.0)
    for i in range(200):
        name = "unlock" if i % 2 == 0 else "lock"
        assert lock.apply_command(name, {}, now=i * 10.0) == (True, "")
        lock.step(i * 10.0 + 5)


def test_the_door_opens_now_and_then_only_when_unlocked_and_refuses_locking() -> None:
    locked = SimLock(seed=4, lock_state="locked", door_opens_per_h=60.0)
    seen = run(locked, 0, 2 * HOUR, every=5)
    assert seen and all(r.get("door") == "closed" for _, r in seen), "a locked door stays shut"

    lock = SimLock(seed=4, rate=1 / 60, lock_state="unlocked", door_opens_per_h=60.0, door_open_s=(5.0, 20.0))
    reports = run(lock, 0, 2 * HOUR, every=1)
    doors = [r["door"] for _, r in reports if "door" in r]
    assert doors.count("open") >= 20 and doors.count("closed") >= 20

    lock.restore({"door": "open"})
    assert lock.apply_command("lock", {}, now=2 * HOUR + 1) == (False, "door_open")


def test_the_battery_drains_slowly() -> None:
    lock = SimLock(seed=1, battery_pct=80.0, battery_drain_pct_per_h=0.5, door_opens_per_h=0.0)
    run(lock, 0, 10 * HOUR, every=60)
    assert lock.state["battery_pct"] == 75
