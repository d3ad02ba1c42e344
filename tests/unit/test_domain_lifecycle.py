"""A device's whole life through decide -> stamp -> evolve, as the device actor runs it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import Any

import msgspec
import pytest

from hearth_shared.domain import (
    Change,
    Twin,
    decide,
    device_type_names,
    evolve,
    older_key_seqs,
    stamp,
    tick,
    twin_delta,
    twin_view,
)
from hearth_shared.domain.twin import carried_at
from hearth_shared.schema.events import (
    AcknowledgeCommand,
    CommandAcknowledged,
    CommandConverged,
    CommandDispatched,
    CommandExpired,
    CommandFailed,
    CommandFailedPayload,
    CommandRequested,
    CommandSuperseded,
    DeviceCameOnline,
    DeviceRegistered,
    DeviceWentOffline,
    Event,
    Inbound,
    RegisterDevice,
    ReportAvailability,
    ReportState,
    StateReported,
    StateReportedPayload,
    SubmitCommand,
    decode_event,
    encode,
)
from tests.support.inbox_requests import payload_of

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
OFFLINE_AFTER_S = 60.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Device:
    """One thermostat driven as the actor drives it: decide, stamp, append to a journal, evolve."""

    def __init__(self) -> None:
        self.twin: Twin | None = None
        self.journal: list[Event] = []
        self.seq = 0

    def apply(self, changes: list[Change], now: datetime, cause: uuid.UUID | None) -> list[type[Event]]:
        events = stamp(self.twin, changes, home_id="h1", device_id="t1", now=now, causation_id=cause)
        for event in events:
            self.twin = evolve(self.twin, event)
        self.journal += events
        return [type(e) for e in events]

    def send(self, request: Inbound, now: datetime) -> list[type[Event]]:
        return self.apply(decide(self.twin, request, now), now, request.request_id)

    def tick(self, now: datetime) -> list[type[Event]]:
        return self.apply(tick(self.twin, now, offline_after_s=OFFLINE_AFTER_S), now, None)

    def register(self, device_type: str = "thermostat") -> list[type[Event]]:
        request = RegisterDevice(
            request_id=uuid.uuid4(),
            device_id="t1",
            sent_at=T0,
            home_id="h1",
            device_type=device_type,
            name="Hall",
        )
        return self.send(request, T0)

    def submit(
        self, now: datetime, target: float, *, command_id: uuid.UUID, expires_in_s: float = 300
    ) -> list[type[Event]]:
        return self.send(
            SubmitCommand(
                request_id=uuid.uuid4(),
                device_id="t1",
                sent_at=now,
                home_id="h1",
                command_id=command_id,
                name="set_target_temperature",
                params={"target_c": target},
                expires_at=now + timedelta(seconds=expires_in_s),
            ),
            now,
        )

    def command(self, now: datetime, target: float, expires_in_s: float = 300) -> uuid.UUID:
        command_id = uuid.uuid4()
        self.submit(now, target, command_id=command_id, expires_in_s=expires_in_s)
        return command_id

    def report(
        self, now: datetime, seq: int | None = None, *, sent_at: datetime | None = None, **state: Any
    ) -> list[type[Event]]:
        """A report decided at ``now``, sent (by the gateway) at ``sent_at`` (``now`` unless given)."""
        if seq is None:
            self.seq += 1
            seq = self.seq
        request = ReportState(
            request_id=uuid.uuid4(),
            device_id="t1",
            sent_at=sent_at or now,
            device_seq=seq,
            device_time=now,
            state=state,
        )
        return self.send(request, now)

    def ack(
        self, now: datetime, command_id: uuid.UUID, ok: bool = True, reason: str = ""
    ) -> list[type[Event]]:
        request = AcknowledgeCommand(
            request_id=uuid.uuid4(), device_id="t1", sent_at=now, command_id=command_id, ok=ok, reason=reason
        )
        return self.send(request, now)

    def availability(self, now: datetime, *, online: bool) -> list[type[Event]]:
        request = ReportAvailability(request_id=uuid.uuid4(), device_id="t1", sent_at=now, online=online)
        return self.send(request, now)

    @property
    def state(self) -> Twin:
        assert self.twin is not None
        return self.twin

    def status(self, command_id: uuid.UUID) -> str:
        command = self.state.commands.get(str(command_id))
        return command.status if command else "gone (terminal)"


def online_device() -> Device:
    device = Device()
    device.register()
    device.report(T0, hvac_mode="heat", target_c=20.0, ambient_c=19.0)
    return device


def test_registration_creates_an_offline_twin_at_version_1() -> None:
    device = Device()
    assert device.register() == [DeviceRegistered]
    twin = device.state
    assert (twin.version, twin.online, twin.device_type, twin.last_device_seq) == (1, False, "thermostat", -1)
    assert twin.reported == {"hvac_mode": "off", "hvac_action": "off"}


def test_registering_twice_or_an_unknown_type_changes_nothing() -> None:
    device = Device()
    assert device.register("toaster") == []
    device.register()
    assert device.register() == []
    assert device.state.version == 1


def test_requests_for_an_unregistered_device_change_nothing() -> None:
    device = Device()
    device.command(T0, 21.0)
    assert device.report(T0, target_c=21.0) == []
    assert device.journal == []


def test_stamp_numbers_versions_and_correlates_command_facts() -> None:
    device = online_device()
    command_id = device.command(at(5), 21.5)
    versions = [e.version for e in device.journal]
    assert versions == list(range(1, len(device.journal) + 1))
    command_facts = [e for e in device.journal if e.version > 4]
    assert command_facts and all(e.correlation_id == command_id for e in command_facts)
    assert all(e.occurred_at == at(5) == e.recorded_at for e in command_facts)


def test_state_reported_occurs_at_the_device_time() -> None:
    device = online_device()
    request = ReportState(
        request_id=uuid.uuid4(),
        device_id="t1",
        sent_at=at(9),
        device_seq=7,
        device_time=at(3),
        state={"ambient_c": 18},
    )
    device.send(request, at(9))
    last = device.journal[-1]
    assert (type(last), last.occurred_at, last.recorded_at, last.causation_id) == (
        StateReported,
        at(3),
        at(9),
        request.request_id,
    )


def test_report_records_only_changed_keys_but_always_advances_the_seq() -> None:
    device = online_device()
    device.report(at(1), ambient_c=19.0, humidity_pct=40)
    assert payload_of(device.journal[-1], StateReportedPayload).reported == {"humidity_pct": 40}
    assert device.report(at(2), ambient_c=19.0) == [StateReported]
    assert payload_of(device.journal[-1], StateReportedPayload).reported == {}
    assert device.state.last_device_seq == 3


def test_duplicate_and_older_reports_are_ignored() -> None:
    device = online_device()
    device.report(at(1), seq=10, ambient_c=22.0)
    assert device.report(at(2), seq=10, ambient_c=22.0) == []
    assert device.report(at(3), seq=9, ambient_c=15.0) == []
    assert device.state.reported["ambient_c"] == 22.0


def test_an_older_report_records_only_the_keys_no_newer_report_carried() -> None:
    """Reports can arrive out of order (an ack's report on the command lane overtakes telemetry): an older
    one records the keys no newer report carried, at their newest values; a key a newer report carried
    at an unchanged value (named in ``unchanged``) is not overwritten either; a replay gives the same twin."""
    device = online_device()
    device.report(at(1), seq=10, target_c=21.0, ambient_c=19.0)
    newer = payload_of(device.journal[-1], StateReportedPayload)
    assert (newer.reported, newer.unchanged) == ({"target_c": 21.0}, ("ambient_c",))
    assert device.report(at(2), seq=9, ambient_c=18.0, humidity_pct=41, target_c=20.0) == [StateReported]
    older = payload_of(device.journal[-1], StateReportedPayload)
    assert (older.reported, older.unchanged, older.device_seq) == ({"humidity_pct": 41}, (), 9)
    twin = device.state
    assert (twin.reported["ambient_c"], twin.reported["target_c"], twin.reported["humidity_pct"]) == (
        19.0,
        21.0,
        41,
    )
    assert twin.last_device_seq == 10
    assert (
        carried_at(twin, "humidity_pct"),
        carried_at(twin, "ambient_c"),
        carried_at(twin, "hvac_mode"),
    ) == (9, 10, 1)
    assert device.report(at(3), seq=9, humidity_pct=41) == []  # redelivered: nothing left to record
    assert device.report(at(4), seq=8, humidity_pct=40, target_c=19.0) == []  # overtaken whole
    replayed = None
    for event in device.journal:
        replayed = evolve(replayed, event)
    assert replayed == device.state


def test_the_twin_notes_only_the_keys_its_newest_report_did_not_carry() -> None:
    """``older_key_seqs`` costs a device that reports its whole state nothing, and one that reports what
    changed an entry per key it did not report last; the rebuild's fold of held reports agrees."""
    device = online_device()  # seq 1: hvac_mode, target_c, ambient_c; hvac_action is the registration's
    assert device.state.older_key_seqs == {"hvac_action": -1}
    device.report(at(1), target_c=21.0)
    assert device.state.older_key_seqs == {"hvac_action": -1, "hvac_mode": 1, "ambient_c": 1}
    device.report(at(2), hvac_mode="heat", hvac_action="idle", target_c=21.0, ambient_c=19.5)
    assert device.state.older_key_seqs == {}
    reports = [e for e in device.journal if isinstance(e, StateReported)]
    before = reduce(evolve, device.journal[: device.journal.index(reports[0])], None)
    assert before is not None
    older, reported, last = before.older_key_seqs, dict(before.reported), before.last_device_seq
    for event in reports:
        older = older_key_seqs(older, reported, last, event.payload)
        reported.update(event.payload.reported)
        last = max(last, event.payload.device_seq)
    assert (older, reported, last) == (device.state.older_key_seqs, device.state.reported, 3)


def test_first_report_brings_the_device_online() -> None:
    device = Device()
    device.register()
    assert device.report(at(1), ambient_c=20.0) == [DeviceCameOnline, StateReported]
    assert (device.state.online, device.state.last_seen) == (True, at(1))


def test_ack_then_report_converges() -> None:
    device = online_device()
    command_id = device.command(at(1), 22.0)
    assert device.status(command_id) == "dispatched"
    assert twin_delta(device.state) == {"target_c": 22.0}
    assert device.ack(at(2), command_id) == [CommandAcknowledged]
    assert device.report(at(3), target_c=22.0) == [StateReported, CommandConverged]
    assert device.status(command_id) == "gone (terminal)"
    assert twin_delta(device.state) == {}


def test_a_repeated_ack_changes_nothing() -> None:
    device = online_device()
    command_id = device.command(at(1), 22.0)
    device.ack(at(2), command_id)
    assert device.ack(at(3), command_id) == []


def test_delta_counts_desired_keys_not_reported_yet() -> None:
    device = online_device()
    device.command(at(1), 21.0)
    device.report(at(2), target_c=21.0)
    twin = msgspec.structs.replace(device.state, desired={**device.state.desired, "target_low_c": 19.0})
    assert twin_delta(twin) == {"target_low_c": 19.0}


def test_report_before_ack_converges_at_the_ack() -> None:
    device = online_device()
    command_id = device.command(at(1), 22.0)
    assert device.report(at(2), target_c=22.0) == [StateReported]
    assert device.ack(at(3), command_id) == [CommandAcknowledged, CommandConverged]


def test_negative_ack_fails_the_command_with_its_reason() -> None:
    device = online_device()
    command_id = device.command(at(1), 22.0)
    assert device.ack(at(2), command_id, ok=False, reason="hardware_fault") == [CommandFailed]
    assert payload_of(device.journal[-1], CommandFailedPayload).reason == "hardware_fault"
    assert device.status(command_id) == "gone (terminal)"
    assert device.ack(at(3), command_id) == []  # a terminal command takes no more acks


def test_duplicate_command_is_decided_once() -> None:
    device = online_device()
    command_id = device.command(at(1), 22.0)
    assert device.submit(at(2), 22.0, command_id=command_id) == []


def test_a_command_redelivered_after_it_ended_is_not_decided_again() -> None:
    device = online_device()
    command_id = device.command(at(1), 22.0)
    device.ack(at(2), command_id)
    device.report(at(3), target_c=22.0)
    assert device.status(command_id) == "gone (terminal)"
    assert device.submit(at(4), 22.0, command_id=command_id) == []


def test_expired_on_arrival_is_requested_then_expired() -> None:
    device = online_device()
    device.command(at(10), 22.0, expires_in_s=0)
    assert [type(e) for e in device.journal[-2:]] == [CommandRequested, CommandExpired]


def test_tick_expires_commands_past_their_deadline_only() -> None:
    device = Device()
    device.register()
    command_id = device.command(at(0), 22.0, expires_in_s=30)
    assert device.tick(at(29)) == []
    assert device.tick(at(30)) == [CommandExpired]
    assert device.status(command_id) == "gone (terminal)"


def test_tick_marks_a_silent_device_offline() -> None:
    device = online_device()
    device.report(at(50), ambient_c=19.5)  # every report moves last_seen on
    assert device.tick(at(50 + OFFLINE_AFTER_S)) == []
    assert device.tick(at(51 + OFFLINE_AFTER_S)) == [DeviceWentOffline]
    assert (device.state.online, device.state.last_seen) == (False, at(50))


def test_offline_device_holds_commands_and_gets_them_when_it_comes_back() -> None:
    device = online_device()
    device.tick(at(100))
    held = device.command(at(110), 22.0, expires_in_s=300)
    expiring = device.command(at(110), 23.0, expires_in_s=20)  # supersedes `held`, then expires
    assert device.status(expiring) == "accepted"
    assert device.status(held) == "gone (terminal)"
    assert CommandSuperseded in [type(e) for e in device.journal]
    hvac = uuid.uuid4()
    device.send(
        SubmitCommand(
            request_id=uuid.uuid4(),
            device_id="t1",
            sent_at=at(110),
            home_id="h1",
            command_id=hvac,
            name="set_hvac_mode",
            params={"mode": "cool"},
            expires_at=at(400),
        ),
        at(110),
    )
    assert device.report(at(200), ambient_c=19.5) == [DeviceCameOnline, CommandDispatched, StateReported]
    assert device.journal[-2].correlation_id == hvac
    assert (device.status(hvac), device.status(expiring)) == ("dispatched", "accepted")


def test_the_will_takes_a_device_offline_at_once_and_online_brings_it_back() -> None:
    device = online_device()
    device.report(at(5), ambient_c=19.5)
    assert device.availability(at(6), online=False) == [DeviceWentOffline]
    assert (device.state.online, device.state.last_seen) == (False, at(5))  # last heard at 5, not 6
    assert device.availability(at(7), online=False) == []  # a repeated will changes nothing
    held = device.command(at(8), 22.0)
    assert device.status(held) == "accepted"  # held while offline
    assert device.availability(at(9), online=True) == [DeviceCameOnline, CommandDispatched]
    assert (device.state.online, device.state.last_seen, device.status(held)) == (True, at(9), "dispatched")


def test_a_report_sent_before_the_device_went_offline_records_its_state_but_does_not_bring_it_back() -> None:
    """The will (command lane) decided before a report sent just before it (telemetry lane): the device
    stays offline and its held command stays held; a report sent after the will brings it back."""
    device = online_device()
    assert device.availability(at(6), online=False) == [DeviceWentOffline]
    held = device.command(at(7), 22.0)
    assert device.report(at(8), sent_at=at(5.9), ambient_c=19.5) == [StateReported]
    assert (device.state.online, device.state.reported["ambient_c"], device.status(held)) == (
        False,
        19.5,
        "accepted",
    )
    assert device.report(at(9), sent_at=at(9), ambient_c=19.6) == [
        DeviceCameOnline,
        CommandDispatched,
        StateReported,
    ]
    assert device.state.online and device.status(held) == "dispatched"
    device.tick(at(9 + OFFLINE_AFTER_S + 1))  # silent: offline by the tick, the same rule after it
    assert not device.state.online
    assert device.report(at(80), sent_at=at(9.5), ambient_c=19.7) == [StateReported]
    assert not device.state.online


def test_a_report_with_a_sent_at_without_a_zone_is_read_as_utc_not_failed() -> None:
    device = online_device()
    device.availability(at(6), online=False)
    naive = at(5).replace(tzinfo=None)
    assert device.report(at(8), sent_at=naive, ambient_c=19.5) == [StateReported]  # before: stays offline
    assert device.report(at(9), sent_at=at(7).replace(tzinfo=None), ambient_c=19.6)[0] is DeviceCameOnline


def test_online_from_an_online_device_dispatches_again_what_it_has_not_acknowledged() -> None:
    """It (re)connected, maybe where what was dispatched did not reach it (decide._availability)."""
    device = online_device()
    device.report(at(5), ambient_c=19.5)
    assert device.availability(at(6), online=True) == []  # nothing in flight: nothing to repeat
    unacknowledged, acknowledged = device.command(at(7), 22.0), device.command(at(7), 23.0)
    device.ack(at(8), acknowledged)
    assert device.availability(at(9), online=True) == [CommandDispatched]
    assert device.journal[-1].correlation_id == unacknowledged
    assert (device.status(unacknowledged), device.status(acknowledged)) == ("dispatched", "acknowledged")
    device.ack(at(10), unacknowledged)
    assert device.ack(at(11), unacknowledged) == []  # the repeat's second ack is nothing
    assert device.availability(at(12), online=True) == []


def test_availability_of_an_unregistered_device_changes_nothing() -> None:
    device = Device()
    assert device.availability(T0, online=True) == []
    assert device.availability(T0, online=False) == []


def test_evolve_ignores_facts_it_already_applied() -> None:
    device = online_device()
    device.command(at(1), 22.0)
    twin = device.state
    for event in device.journal:
        assert evolve(twin, event) is twin


def test_replay_of_the_journal_rebuilds_the_same_twin() -> None:
    device = online_device()
    first = device.command(at(1), 22.0)
    device.ack(at(2), first)
    device.report(at(3), target_c=22.0, hvac_action="heating")
    device.tick(at(100))
    device.command(at(110), 23.0)
    device.command(at(111), 24.0)
    device.report(at(120), hvac_mode="heat")
    wire = [decode_event(encode(e)) for e in device.journal]  # through JSON, as a rebuild reads them
    replayed = reduce(evolve, wire, None)
    assert replayed == device.state
    assert msgspec.json.encode(replayed) == msgspec.json.encode(device.state)


def test_evolve_needs_a_registration_first() -> None:
    device = online_device()
    with pytest.raises(ValueError, match=r"before device\.registered"):
        evolve(None, device.journal[-1])


def test_twin_view_has_the_contract_shape() -> None:
    device = online_device()
    device.command(at(1), 22.5)
    view = twin_view(device.state)
    assert view == {
        "device_id": "t1",
        "home_id": "h1",
        "type": "thermostat",
        "name": "Hall",
        "desired": {"target_c": 22.5},
        "reported": {"hvac_mode": "heat", "hvac_action": "off", "target_c": 20.0, "ambient_c": 19.0},
        "delta": {"target_c": 22.5},
        "version": device.state.version,
        "connectivity": {"online": True, "last_seen": T0.isoformat()},
        "firmware_version": None,  # not reported yet
        "updated_at": at(1).isoformat(),
        "quarantine": None,  # {reason, since} while quarantined (test_domain_admin.py)
    }


def test_twin_view_shows_the_reported_firmware_version() -> None:
    device = online_device()
    device.report(at(1), firmware_version="2.4.1")
    assert twin_view(device.state)["firmware_version"] == "2.4.1"


def test_both_device_types_are_registered() -> None:
    assert {"thermostat", "lock"} <= set(device_type_names())
