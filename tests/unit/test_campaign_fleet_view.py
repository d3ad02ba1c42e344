"""The campaign driver's view of the fleet, folded from device facts: firmware, connectivity, anomalies,
the homes' command outcomes and the admin commands' statuses."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from hearth_campaigns.service.fleet_view import FleetView
from hearth_shared.domain import decide, evolve, stamp
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import Event, Inbound, encode, fact_type
from tests.support.inbox_requests import ack_request, command_request, register_request, report_request

pytestmark = pytest.mark.unit

T0 = datetime(2026, 4, 1, 8, tzinfo=UTC)


class Device:
    """One device's facts, made by the real decide/stamp/evolve, fed to a FleetView as the driver does."""

    def __init__(self, view: FleetView) -> None:
        self.view, self.now = view, T0
        self.twin_state: Twin | None = None

    def send(self, request: Inbound, after_s: float = 1.0) -> list[Event]:
        self.now += timedelta(seconds=after_s)
        events = stamp(
            self.twin_state,
            decide(self.twin_state, request, self.now),
            home_id="h1",
            device_id="d1",
            now=self.now,
            causation_id=None,
        )
        for event in events:
            self.twin_state = evolve(self.twin_state, event)
            wire = encode(event)
            if self.view.wants(fact_type(wire), wire):
                self.view.apply(event)
        return events


def test_the_view_follows_firmware_connectivity_and_commands() -> None:
    view = FleetView()
    device = Device(view)
    device.send(register_request("d1", home_id="h1", device_type="lock"))
    device.send(report_request("d1", 1, at=T0, lock_state="locked", firmware_version="1.0.0"))
    sight = view.sight().devices["d1"]
    assert (sight.home_id, sight.device_type, sight.online, sight.firmware_version) == (
        "h1",
        "lock",
        True,
        "1.0.0",
    )

    unlock = command_request("d1", "unlock", {}, home_id="h1", at=device.now)
    device.send(unlock)
    device.send(ack_request("d1", unlock.command_id))
    device.send(report_request("d1", 2, at=device.now, lock_state="unlocked"))
    assert [o.converged for o in view.sight().devices["d1"].outcomes] == [True]
    assert unlock.command_id not in view.sight().commands  # a home's command is an outcome, not tracked

    update_id = uuid.uuid4()
    update = command_request(
        "d1",
        "update_firmware",
        {"version": "2.0.0", "url": "https://fw.example/2.bin", "sha256": "c" * 64},
        home_id="h1",
        at=device.now,
        command_id=update_id,
    )
    device.send(update)
    assert view.sight().commands[update_id].status == "dispatched"
    device.send(ack_request("d1", update_id, ok=False, reason="checksum_mismatch"))
    seen = view.sight().commands[update_id]
    assert (seen.status, seen.reason) == ("failed", "checksum_mismatch")


def test_telemetry_without_firmware_is_not_decoded() -> None:
    view = FleetView()
    device = Device(view)
    device.send(register_request("d1", home_id="h1", device_type="thermostat"))
    (reported,) = [
        e for e in device.send(report_request("d1", 1, at=T0, ambient_c=20.0)) if "state" in e.type
    ]
    wire = encode(reported)
    assert not view.wants(fact_type(wire), wire)


def test_evidence_older_than_the_campaigns_need_is_forgotten() -> None:
    view = FleetView()
    device = Device(view)
    device.send(register_request("d1", home_id="h1", device_type="lock"))
    device.send(report_request("d1", 1, at=T0, lock_state="locked"))  # online
    for seq, (name, state) in enumerate((("unlock", "unlocked"), ("lock", "locked")), start=2):
        command = command_request("d1", name, {}, home_id="h1", at=device.now)
        device.send(command, after_s=60)
        device.send(ack_request("d1", command.command_id))
        device.send(report_request("d1", seq, at=device.now, lock_state=state))
    first, second = (o.at for o in view.sight().devices["d1"].outcomes)
    assert first < second
    view.forget_evidence_before(second)
    assert [o.at for o in view.sight().devices["d1"].outcomes] == [second]
    view.forget_evidence_before(device.now + timedelta(seconds=1))
    assert view.sight().devices["d1"].outcomes == ()
    assert view.sight().devices["d1"].device_type == "lock"  # the device itself stays
