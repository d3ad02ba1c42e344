"""Simulated firmware installs and their failure modes, in the hub's core without a broker."""

from __future__ import annotations

import pytest

from hearth_shared.adapters.topics import Topics
from hearth_shared.schema.events import AcknowledgeCommand, ReportState
from hearth_simulator.firmware import FirmwareOptions
from hearth_simulator.fleet import Fleet, FleetOptions
from tests.unit.test_simulator_fleet import T0, command, play, registered

pytestmark = pytest.mark.unit

FAULTS = FirmwareOptions.parse_faults("6.6.6=bad_checksum, 7.0.0=never_returns,8.0.0=drifts")
IMAGE = {"url": "https://fw.example/x.bin", "sha256": "ab" * 32}


def hub() -> Fleet:
    options = FleetOptions(rate=1.0, firmware=FirmwareOptions(install_s=2.0, faults=FAULTS))
    gateway = Fleet("unused:9092", Topics("test"), options)
    gateway.learn(registered("t1", "thermostat"), T0)
    gateway.learn(registered("l1", "lock"), T0)
    return gateway


def firmware_reports(sent: list[ReportState | AcknowledgeCommand], device_id: str) -> list[object]:
    return [
        r.state["firmware_version"]
        for r in sent
        if isinstance(r, ReportState) and r.device_id == device_id and "firmware_version" in r.state
    ]


def acks(sent: list[ReportState | AcknowledgeCommand]) -> list[tuple[bool, str]]:
    return [(r.ok, r.reason) for r in sent if isinstance(r, AcknowledgeCommand)]


def test_devices_report_their_firmware_then_the_new_one_after_installing() -> None:
    gateway = hub()
    assert set(firmware_reports(play(gateway, T0, T0 + 3), "l1")) == {"1.0.0"}
    gateway.on_command(command("l1", "update_firmware", {"version": "2.0.0", **IMAGE}, 60), T0 + 3)
    sent = play(gateway, T0 + 3, T0 + 4.5)
    assert acks(sent) == [(True, "")]
    assert firmware_reports(sent, "l1") == []  # installing: silent
    after = firmware_reports(play(gateway, T0 + 4.5, T0 + 8), "l1")
    assert after and set(after) == {"2.0.0"}  # the model's telemetry says what it now runs


def test_a_device_says_its_new_firmware_as_soon_as_it_is_back_not_at_its_next_telemetry() -> None:
    options = FleetOptions(rate=0.01, firmware=FirmwareOptions(install_s=2.0, faults=FAULTS))  # 100 s
    gateway = Fleet("unused:9092", Topics("test"), options)
    gateway.learn(registered("l1", "lock"), T0)
    play(gateway, T0, T0 + 1)
    gateway.on_command(command("l1", "update_firmware", {"version": "2.0.0", **IMAGE}, 60), T0 + 1)
    assert firmware_reports(play(gateway, T0 + 1, T0 + 2.5), "l1") == []  # installing: silent
    assert firmware_reports(play(gateway, T0 + 2.5, T0 + 4), "l1") == ["2.0.0"]  # back after 2 s


def test_a_bad_checksum_is_refused_and_the_firmware_stays() -> None:
    gateway = hub()
    play(gateway, T0, T0 + 2)
    gateway.on_command(command("l1", "update_firmware", {"version": "6.6.6", **IMAGE}, 60), T0 + 2)
    sent = play(gateway, T0 + 2, T0 + 6)
    assert acks(sent) == [(False, "checksum_mismatch")]
    assert set(firmware_reports(sent, "l1")) <= {"1.0.0"}  # still the old firmware
    assert any(isinstance(r, ReportState) and r.device_id == "l1" for r in sent)  # it goes on reporting


def test_a_device_that_never_returns_is_never_heard_again() -> None:
    gateway = hub()
    play(gateway, T0, T0 + 2)
    gateway.on_command(command("l1", "update_firmware", {"version": "7.0.0", **IMAGE}, 60), T0 + 2)
    sent = play(gateway, T0 + 2, T0 + 30)
    assert acks(sent) == [(True, "")]
    assert not any(isinstance(r, ReportState) and r.device_id == "l1" for r in sent)


def test_a_drifting_firmware_makes_a_thermostats_reading_run_away_until_rolled_back() -> None:
    gateway = hub()
    play(gateway, T0, T0 + 2)
    before = gateway.players["t1"].model.state["ambient_c"]
    gateway.on_command(command("t1", "update_firmware", {"version": "8.0.0", **IMAGE}, 60), T0 + 2)
    play(gateway, T0 + 2, T0 + 62)
    drifted = gateway.players["t1"].model.state["ambient_c"]
    assert abs(drifted - before) > 0.5  # 40 degC/h for a minute, beyond what the room does itself
    gateway.on_command(command("t1", "update_firmware", {"version": "1.0.0", **IMAGE}, 600), T0 + 62)
    assert gateway.players["t1"].firmware.drifting is False


def test_fault_lists_are_checked() -> None:
    with pytest.raises(ValueError, match="a fault is one of"):
        FirmwareOptions.parse_faults("1.0=explodes")
