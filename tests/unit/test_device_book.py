"""The command API's device book as a fold that restarts from a snapshot and forgets finished commands
(pure, in memory: no broker; the device actor is played by the domain's own ``decide``/``stamp``/
``evolve``, so the facts are the ones it records).

* a snapshot restored into a fresh view equals the fold, and folds on alike;
* a finished command leaves once the window has passed since its terminal fact's ``recorded_at``, not
  before, and a replay of the same facts later prunes alike;
* a snapshot written in format 1 (bytes kept here) still restores; one of an unknown format is refused
  and leaves the state as it was;
* an Idempotency-Key names the same command within the window and a new one after it, and the device
  actor runs that new one (it drops a request whose command id it has seen).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hearth_command_api.service.device_book import (
    CommandEntry,
    DeviceBook,
    fingerprint,
    keyed_command_id,
    unversioned_command_id,
)
from hearth_shared.domain import decide, evolve, stamp
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import Event, Inbound, RegisterDevice, SubmitCommand, encode, fact_type
from tests.support.fakes import FakeClock

pytestmark = pytest.mark.unit

T0 = datetime(2026, 7, 1, 12, tzinfo=UTC)
WINDOW = timedelta(hours=1)
DEADLINE = timedelta(hours=3, minutes=30)  # the longest a command may wait (max_expires_in_s)


@dataclass
class PlayedDevice:
    """One device as the actor keeps it: requests decided into facts, the facts kept in order."""

    device_id: str
    home_id: str = "h1"
    twin: Twin | None = None
    facts: list[Event] = field(default_factory=list)

    def request(self, request: Inbound, now: datetime) -> list[Event]:
        facts = stamp(
            self.twin,
            decide(self.twin, request, now),
            home_id=self.home_id,
            device_id=self.device_id,
            now=now,
            causation_id=request.request_id,
        )
        for fact in facts:
            self.twin = evolve(self.twin, fact)
        self.facts += facts
        return facts

    def register(self, now: datetime, device_type: str = "thermostat") -> list[Event]:
        return self.request(
            RegisterDevice(
                request_id=uuid.uuid4(),
                device_id=self.device_id,
                sent_at=now,
                home_id=self.home_id,
                device_type=device_type,
                name="Hall",
            ),
            now,
        )

    def submit(
        self,
        command_id: uuid.UUID,
        now: datetime,
        *,
        expires_in: timedelta,
        params: dict[str, Any] | None = None,
    ) -> list[Event]:
        return self.request(
            SubmitCommand(
                request_id=uuid.uuid4(),
                device_id=self.device_id,
                sent_at=now,
                home_id=self.home_id,
                command_id=command_id,
                name="set_target_temperature",
                params=params or {"target_c": 21.0},
                expires_at=now + expires_in,
            ),
            now,
        )


def view_at(clock: FakeClock) -> DeviceBook:
    return DeviceBook(
        window_s=WINDOW.total_seconds(), longest_deadline_s=DEADLINE.total_seconds(), clock=clock
    )


async def fold(view: DeviceBook, facts: list[Event]) -> None:
    """The facts as the follower hands them over: encoded records, then ``after_poll``."""
    for offset, fact in enumerate(facts):
        await view.on_journal_record("journal", 0, offset, encode(fact))
    await view.after_poll()


def state(view: DeviceBook) -> tuple[dict[str, Any], dict[uuid.UUID, tuple[Any, ...]]]:
    """What the view knows, waiters aside."""
    commands = {
        command_id: (c.device_id, c.fingerprint, c.status, c.expires_at, c.finished_at)
        for command_id, c in view.commands.items()
    }
    return dict(view.devices), commands


def a_history() -> tuple[PlayedDevice, dict[str, uuid.UUID]]:
    """A registered thermostat with a command of each kind: finished early (expired at once), rejected
    (out of range), finished late, and one held while the device is offline (accepted, not finished)."""
    device = PlayedDevice("h1-thermostat")
    device.register(T0)
    ids = {name: uuid.uuid4() for name in ("expired", "rejected", "late", "held")}
    device.submit(ids["expired"], T0 + timedelta(minutes=1), expires_in=timedelta(0))
    device.submit(ids["rejected"], T0 + timedelta(minutes=2), expires_in=WINDOW, params={"target_c": 99.0})
    device.submit(ids["late"], T0 + timedelta(minutes=40), expires_in=timedelta(0))
    device.submit(ids["held"], T0 + timedelta(minutes=50), expires_in=timedelta(hours=5))
    return device, ids


async def test_a_restored_snapshot_equals_the_fold_and_folds_on_alike() -> None:
    device, ids = a_history()
    clock = FakeClock(T0 + timedelta(minutes=55))
    live = view_at(clock)
    await fold(live, device.facts)
    assert {live.commands[i].status for i in ids.values()} == {"expired", "rejected", "accepted"}

    restored = view_at(clock)
    restored.remember_device("stale-device", "h9", "lock")  # replaced whole by the restore
    restored.restore(live.snapshot())
    assert state(restored) == state(live)

    later = device.submit(uuid.uuid4(), T0 + timedelta(minutes=56), expires_in=timedelta(0))
    clock.now = T0 + timedelta(minutes=62)  # the window has passed for "expired" and "rejected"
    await fold(live, later)
    await fold(restored, later)
    assert state(restored) == state(live)
    assert ids["expired"] not in restored.commands and ids["late"] in restored.commands


async def test_a_finished_command_leaves_once_the_window_passed_since_its_terminal_fact() -> None:
    device = PlayedDevice("h1-thermostat")
    device.register(T0)
    done, held = uuid.uuid4(), uuid.uuid4()
    finished_at = T0 + timedelta(minutes=5)
    device.submit(done, finished_at, expires_in=timedelta(0))  # requested and expired at once
    device.submit(held, finished_at, expires_in=timedelta(minutes=30))  # offline device: held, unfinished
    clock = FakeClock(finished_at)
    view = view_at(clock)
    await fold(view, device.facts)
    assert view.commands[done].finished_at == finished_at

    clock.now = finished_at + WINDOW - timedelta(seconds=1)
    assert view.prune() == 0 and done in view.commands
    assert view.in_window(view.commands[done], clock.now)
    clock.now = finished_at + WINDOW
    assert not view.in_window(view.commands[done], clock.now)  # the answer is the clock's, pruned or not
    assert view.prune() == 1 and done not in view.commands
    assert held in view.commands  # not finished: it stays

    # A command that never finishes (say its request was dropped) leaves a window after its deadline.
    clock.now = finished_at + timedelta(minutes=30) + WINDOW
    assert view.prune() == 1 and view.commands == {}

    # A replay of the same facts, later, keeps none of them either: the times are the facts'.
    replayed = view_at(clock)
    await fold(replayed, device.facts)
    assert replayed.commands == {} and set(replayed.devices) == {"h1-thermostat"}


async def test_pruning_drops_exactly_the_commands_that_are_due() -> None:
    """Thousands of commands in their window: a prune before any is due drops nothing; once some are
    due, exactly those leave."""
    clock = FakeClock(T0)
    view = view_at(clock)
    for n in range(5000):
        view.remember_command(uuid.uuid4(), "d", b"p", T0 + timedelta(seconds=n))
    clock.now = T0 + WINDOW - timedelta(seconds=1)
    assert view.prune() == 0 and len(view.commands) == 5000
    clock.now = T0 + WINDOW + timedelta(seconds=99)
    assert view.prune() == 100 and len(view.commands) == 4900


# A snapshot in format 1, as this release wrote it (``format_1_view().snapshot().hex()``): later
# releases must still restore it, since it may be all that is left of facts a retention window removed.
FORMAT_1 = bytes.fromhex(
    "83a6666f726d617401"
    "a76465766963657392"
    "94a96b69746368656e2d31a26831aa746865726d6f73746174c2"
    "94a66c6f636b2d37a26832a46c6f636bc3"
    "a8636f6d6d616e64739296c41000112233445566778899aabbccddeeffa96b69746368656e2d31c40c"
    "0102030405060708090a0b0ca9636f6e766572676564d6ff6a450140d6ff6a450058"
    "96c410ffeeddccbbaa99887766554433221100a96b69746368656e2d31c40c0c0b0a090807060504030201"
    "a86163636570746564d6ff6a451d60c0"
)


def format_1_view() -> DeviceBook:
    view = DeviceBook()
    view.remember_device("kitchen-1", "h1", "thermostat")
    view.remember_device("lock-7", "h2", "lock", simulated=True)
    done = view.remember_command(
        uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"), "kitchen-1", bytes(range(1, 13)), T0
    )
    done.status, done.finished_at = "converged", T0 - timedelta(seconds=232)
    held = view.remember_command(
        uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100"),
        "kitchen-1",
        bytes(range(12, 0, -1)),
        T0 + WINDOW * 2,
    )
    held.status = "accepted"
    return view


def test_a_format_1_snapshot_still_restores() -> None:
    restored = DeviceBook()
    restored.restore(FORMAT_1)
    assert state(restored) == state(format_1_view())
    assert restored.devices["lock-7"].simulated is True
    done = restored.commands[uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")]
    assert (done.status, done.finished_at) == ("converged", T0 - timedelta(seconds=232))


@pytest.mark.parametrize(
    "data",
    [
        b"\x81\xa6format\x02",  # a format this release does not know
        b"\x83\xa6format\x01\xa7devices\x01\xa8commands\x90",  # format 1, devices not a list
        b"not msgpack at all",
    ],
    ids=["unknown-format", "wrong-shape", "garbage"],
)
def test_a_snapshot_it_cannot_read_is_refused_and_the_state_stays(data: bytes) -> None:
    view = format_1_view()
    before = state(view)
    with pytest.raises(Exception):  # noqa: B017, PT011 (msgspec's errors or the format's ValueError)
        view.restore(data)
    assert state(view) == before


def test_a_key_names_one_command_per_window_and_a_new_one_after() -> None:
    clock = FakeClock(T0)
    view = view_at(clock)
    device_id, print_ = "h1-thermostat", fingerprint("set_target_temperature", {"target_c": 21.0})
    first, known = view.keyed_command(device_id, "k", clock.now)
    assert known is None
    entry = view.remember_command(first, device_id, print_, clock.now + DEADLINE)

    clock.now += WINDOW * 3  # unfinished, with a deadline of hours: a retry finds it, generations later
    assert view.keyed_command(device_id, "k", clock.now) == (first, entry)
    entry.status, entry.finished_at = "converged", clock.now
    clock.now += WINDOW - timedelta(seconds=1)
    assert view.keyed_command(device_id, "k", clock.now) == (first, entry)
    clock.now += timedelta(seconds=1)
    again, known = view.keyed_command(device_id, "k", clock.now)
    assert known is None and again != first
    assert again == keyed_command_id(device_id, "k", view.generation(clock.now))
    assert view.keyed_command("other-device", "k", clock.now)[0] != again  # keys are per device


def test_a_command_named_before_ids_had_generations_still_answers_its_key_within_its_window() -> None:
    clock = FakeClock(T0)
    view = view_at(clock)
    old = unversioned_command_id("h1-thermostat", "k")
    entry = view.remember_command(old, "h1-thermostat", b"p", T0 + timedelta(seconds=30))
    assert view.keyed_command("h1-thermostat", "k", clock.now) == (old, entry)
    entry.status, entry.finished_at = "converged", T0
    clock.now = T0 + WINDOW
    assert view.keyed_command("h1-thermostat", "k", clock.now)[1] is None


def test_the_actor_runs_the_new_command_a_retry_after_the_window_names() -> None:
    device = PlayedDevice("h1-thermostat")
    device.register(T0)
    clock = FakeClock(T0)
    view = view_at(clock)
    first, _ = view.keyed_command(device.device_id, "k", clock.now)
    [requested, expired] = device.submit(first, clock.now, expires_in=timedelta(0))
    assert fact_type(encode(expired)) == "command.expired"
    for fact in (requested, expired):
        view.apply(fact)

    clock.now += WINDOW
    assert device.submit(first, clock.now, expires_in=timedelta(seconds=30)) == []  # the same id: dropped
    retry, known = view.keyed_command(device.device_id, "k", clock.now)
    assert known is None
    facts = device.submit(retry, clock.now, expires_in=timedelta(seconds=30))
    assert [fact_type(encode(f)) for f in facts][:2] == ["command.requested", "command.accepted"]


def test_an_entry_leaves_by_its_finish_or_else_its_deadline() -> None:
    entry = CommandEntry("d", b"p", T0)
    assert entry.leaves_at(60) == T0.timestamp() + 60
    entry.finished_at = T0 + timedelta(minutes=5)
    assert entry.leaves_at(60) == T0.timestamp() + 360
