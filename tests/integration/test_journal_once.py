"""Every journal fact once, also when a device-actor worker dies between appending facts and committing
its inbox offsets (the window issue 9 found duplicates in).

The crash is made exact rather than timed: a worker handles a batch (its facts reach the real journal),
then stops without committing, and its successor starts from the twins as the changelog had them at the
last commit. With the journal catch-up the successor appends nothing twice; without it, the same crash
appends the same facts again (the second test shows the check can fail).
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import Inbound, SubmitCommand
from tests.support.inbox_requests import command_request, register_request, report_request
from tests.support.inbox_worker import Worker, submit
from tests.support.topics import read_journal

pytestmark = pytest.mark.integration

DEVICES = 8


def requests_for(devices: list[str], seqs: range, *, register: bool) -> list[Inbound]:
    out: list[Inbound] = []
    for device_id in devices:
        if register:
            out.append(register_request(device_id, home_id="once"))
        for seq in seqs:
            out.append(
                report_request(device_id, seq, ambient_c=20.0 + seq / 10, hvac_mode="heat", target_c=20.0)
            )
    return out


def command_for(device_id: str) -> SubmitCommand:
    return command_request(
        device_id, "set_target_temperature", {"target_c": 22.5}, home_id="once", expires_in_s=365 * 24 * 3600
    )


async def crash_between_append_and_commit(
    settings: StackSettings, *, catch_up: bool
) -> Counter[tuple[str, int]]:
    """Returns how often each (device, version) is in the journal after the crash and the takeover."""
    devices = [f"once-{uuid.uuid4().hex[:6]}-{i}" for i in range(DEVICES)]
    changelog: dict[bytes, bytes] = {}
    first = Worker(settings, changelog, catch_up=catch_up)
    await first.start()
    try:
        # Registered first, as the API does before a device has credentials: the registrations travel
        # on the command lane and the reports on telemetry, and the lanes are not ordered one against
        # the other (a report of a device not registered yet is ignored).
        registered = requests_for(devices, range(0), register=True)
        await submit(settings, registered)
        await first.handled(len(registered))
        committed = [*registered, *requests_for(devices, range(1, 4), register=False)]
        await submit(settings, committed[len(registered) :])
        await first.handled(len(committed))
        await first.commit()
        at_commit = dict(changelog)  # what the changelog holds once this commit's twins are flushed

        uncommitted = [*requests_for(devices, range(4, 8), register=False), command_for(devices[0])]
        await submit(settings, uncommitted)
        await first.handled(len(committed) + len(uncommitted))  # their facts are in the journal now
    finally:
        await first.crash()

    second = Worker(settings, at_commit, catch_up=catch_up)
    await second.start()  # assigned: reads the uncommitted requests again
    try:
        await second.handled(len(uncommitted))
        await second.commit()
    finally:
        await second.stop()
    events = await read_journal(settings, timeout_s=30)
    return Counter((e.device_id, e.version) for e in events if e.device_id in devices)


async def test_a_worker_killed_before_its_commit_leaves_every_fact_once(stack: StackSettings) -> None:
    copies = await crash_between_append_and_commit(stack, catch_up=True)
    doubled = {key: n for key, n in copies.items() if n > 1}
    assert not doubled, f"facts appended twice: {sorted(doubled)[:10]}"
    by_device: dict[str, list[int]] = {}
    for device_id, version in copies:
        by_device.setdefault(device_id, []).append(version)
    assert len(by_device) == DEVICES
    for device_id, versions in by_device.items():
        assert sorted(versions) == list(range(1, len(versions) + 1)), f"{device_id}: a gap"
        assert len(versions) >= 1 + 7, f"{device_id}: registration and 7 reports expected"


async def test_without_the_catch_up_the_same_crash_doubles_facts(stack: StackSettings) -> None:
    copies = await crash_between_append_and_commit(stack, catch_up=False)
    assert any(n > 1 for n in copies.values()), "the crash window did not double anything: test is blind"
