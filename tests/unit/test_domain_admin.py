"""Administration rules for every type: admin commands, quarantine and release, replayed by folding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hearth_shared.domain import CommandInvalid, Twin, decide, evolve, stamp, twin_delta, twin_view
from hearth_shared.domain.admin import validate_admin
from hearth_shared.schema.events import (
    CommandAcknowledged,
    CommandConverged,
    CommandDispatched,
    CommandFailed,
    CommandRejected,
    DeviceFirmwareUpdateRequested,
    DeviceQuarantined,
    DeviceRebootRequested,
    DeviceReleased,
    Inbound,
    QuarantineDevice,
    ReleaseDevice,
    new_id,
)
from tests.support.inbox_requests import ack_request, command_request, register_request, report_request

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
SHA = "ab" * 32
FIRMWARE = {"version": "2.0.1", "url": "https://fw.example/lock-2.0.1.bin", "sha256": SHA}


def apply(twin: Twin | None, request: Inbound, now: datetime = NOW) -> tuple[Twin, list[str]]:
    """Decide, stamp and fold one request; the twin after it and the wire types of its facts."""
    events = stamp(twin, decide(twin, request, now), home_id="h1", device_id="d1", now=now, causation_id=None)
    for event in events:
        twin = evolve(twin, event)
    assert twin is not None
    return twin, [event.type for event in events]


def online_lock() -> Twin:
    twin, _ = apply(None, register_request("d1", home_id="h1", device_type="lock"))
    twin, _ = apply(twin, report_request("d1", 1, at=NOW, lock_state="locked", door="closed"))
    assert twin.online
    return twin


def quarantine(reason: str = "compromised") -> QuarantineDevice:
    return QuarantineDevice(request_id=new_id(), device_id="d1", sent_at=NOW, reason=reason)


def release() -> ReleaseDevice:
    return ReleaseDevice(request_id=new_id(), device_id="d1", sent_at=NOW)


def test_quarantine_shows_on_the_twin_and_release_clears_it() -> None:
    twin, facts = apply(online_lock(), quarantine("leaking credentials"))
    assert facts == [DeviceQuarantined.__struct_config__.tag]
    assert twin_view(twin)["quarantine"] == {"reason": "leaking credentials", "since": NOW.isoformat()}
    again, facts = apply(twin, quarantine("another reason"))
    assert facts == [] and again.quarantine == twin.quarantine  # a redelivered request changes nothing
    released, facts = apply(twin, release())
    assert facts == [DeviceReleased.__struct_config__.tag]
    assert twin_view(released)["quarantine"] is None
    assert apply(released, release())[1] == []


def test_a_quarantined_device_rejects_every_non_admin_command_with_quarantined() -> None:
    twin, _ = apply(online_lock(), quarantine())
    for name in ("unlock", "lock", "no_such_command"):
        after, facts = apply(twin, command_request("d1", name, {}, home_id="h1", at=NOW))
        assert facts[-1] == CommandRejected.__struct_config__.tag
        assert after.desired == {}
    events = stamp(
        twin,
        decide(twin, command_request("d1", "unlock", {}, home_id="h1", at=NOW), NOW),
        home_id="h1",
        device_id="d1",
        now=NOW,
        causation_id=None,
    )
    rejected = events[-1]
    assert isinstance(rejected, CommandRejected) and rejected.payload.reason == "quarantined"
    # released, the same command goes through
    released, _ = apply(twin, release())
    _, facts = apply(released, command_request("d1", "unlock", {}, home_id="h1", at=NOW))
    assert CommandDispatched.__struct_config__.tag in facts


def test_admin_commands_reach_a_quarantined_device() -> None:
    twin, _ = apply(online_lock(), quarantine())
    reboot = command_request("d1", "reboot", {}, home_id="h1", at=NOW)
    twin, facts = apply(twin, reboot)
    assert DeviceRebootRequested.__struct_config__.tag in facts and facts[-1] == "command.dispatched"
    twin, facts = apply(twin, ack_request("d1", reboot.command_id))  # reboot desires nothing: ack converges
    assert facts == [CommandAcknowledged.__struct_config__.tag, CommandConverged.__struct_config__.tag]


def test_update_firmware_converges_when_the_device_reports_the_version() -> None:
    twin = online_lock()
    update = command_request("d1", "update_firmware", FIRMWARE, home_id="h1", at=NOW)
    twin, facts = apply(twin, update)
    assert DeviceFirmwareUpdateRequested.__struct_config__.tag in facts
    assert twin.desired == {"firmware_version": "2.0.1"}
    assert twin.commands[str(update.command_id)].setting == "firmware"
    twin, facts = apply(twin, ack_request("d1", update.command_id))
    assert facts == [CommandAcknowledged.__struct_config__.tag]  # not installed yet
    later = NOW + timedelta(seconds=5)
    twin, facts = apply(twin, report_request("d1", 2, at=later, firmware_version="2.0.1"), later)
    assert CommandConverged.__struct_config__.tag in facts
    assert twin_delta(twin) == {}


def test_quarantine_fails_the_non_admin_commands_held_for_an_offline_device() -> None:
    twin, _ = apply(None, register_request("d1", home_id="h1", device_type="lock"))  # never online
    held = command_request("d1", "unlock", {}, home_id="h1", at=NOW)
    reboot = command_request("d1", "reboot", {}, home_id="h1", at=NOW)
    twin, _ = apply(twin, held)
    twin, _ = apply(twin, reboot)
    twin, facts = apply(twin, quarantine())
    assert facts == [DeviceQuarantined.__struct_config__.tag, CommandFailed.__struct_config__.tag]
    assert list(twin.commands) == [str(reboot.command_id)]  # the admin command stays held


@pytest.mark.parametrize(
    ("name", "params", "reason"),
    [
        ("reboot", {"now": True}, "invalid_params"),
        ("update_firmware", {**FIRMWARE, "version": "2.0 beta"}, "invalid_version"),
        ("update_firmware", {**FIRMWARE, "url": "ftp://fw.example/x.bin"}, "invalid_url"),
        ("update_firmware", {**FIRMWARE, "url": "https://fw.example/\x00"}, "invalid_url"),
        ("update_firmware", {**FIRMWARE, "sha256": "abc"}, "invalid_sha256"),
        ("update_firmware", {**FIRMWARE, "force": True}, "invalid_params"),
        ("update_firmware", {"url": FIRMWARE["url"], "sha256": SHA}, "invalid_version"),
    ],
)
def test_bad_admin_params_are_refused_with_a_reason(
    name: str, params: dict[str, object], reason: str
) -> None:
    with pytest.raises(CommandInvalid) as refused:
        validate_admin(name, params)
    assert refused.value.reason == reason
    _, facts = apply(online_lock(), command_request("d1", name, params, home_id="h1", at=NOW))
    assert facts[-1] == CommandRejected.__struct_config__.tag
