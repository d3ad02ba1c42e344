"""The lock device type.

Commands ``lock`` {} and ``unlock`` {} desire ``lock_state`` "locked" / "unlocked". A lock refuses to
lock with its door open (``door_open``), and a jammed lock refuses every command (``device_jammed``)
until it reports a good state; a jam reported while a command is in flight fails that command.
Telemetry: ``battery_pct`` is rolled up; locks, unlocks (and both: lock operations), jams and door opens
(readings reporting the door open) are counted.

Its card leads with the lock's state and the door's, and one button: "Unlock" while it is (or was asked
to be) locked, "Lock" otherwise.
"""

from __future__ import annotations

from hearth_shared.domain.device_card import Card, toggle
from hearth_shared.domain.device_type import (
    Command,
    CommandInvalid,
    DeviceType,
    Setting,
    StateCount,
    StateKey,
    Value,
)
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import JSON

LOCK_STATES = ("locked", "unlocked", "locking", "unlocking", "jammed", "open")
LOCK_STATE_LABELS = {
    "locked": "Locked",
    "unlocked": "Unlocked",
    "locking": "Locking",
    "unlocking": "Unlocking",
    "jammed": "Jammed",
    "open": "Open",
}
DOOR_STATES = ("open", "closed")
DOOR_LABELS = {"open": "Open", "closed": "Closed"}
TARGET_STATE = {"lock": "locked", "unlock": "unlocked"}


def _plan(twin: Twin, command: str, params: JSON) -> tuple[str, JSON]:
    if twin.reported.get("lock_state") == "jammed":
        raise CommandInvalid("device_jammed", "the lock is jammed; it takes commands again once unjammed")
    if command == "lock" and twin.reported.get("door") == "open":
        raise CommandInvalid("door_open", "cannot lock while the door is open")
    return "lock", {"lock_state": TARGET_STATE[command]}


def _failure(reported: JSON) -> str | None:
    return "device_jammed" if reported.get("lock_state") == "jammed" else None


TYPE = DeviceType(
    name="lock",
    label="Lock",
    description="A motorized deadbolt with a door sensor",
    state=(
        StateKey("lock_state", Value("string", values=LOCK_STATES, labels=LOCK_STATE_LABELS), label="Lock"),
        StateKey("door", Value("string", values=DOOR_STATES, labels=DOOR_LABELS), label="Door"),
        StateKey("battery_pct", Value("number", 0, 100, unit="%"), rollup=True, label="Battery"),
    ),
    commands=(
        Command("lock", description="Lock (the door must be closed)", label="Lock"),
        Command("unlock", label="Unlock"),
    ),
    card=Card(primary=("lock_state", "door"), controls=(toggle("lock_state", "locked", "lock", "unlock"),)),
    settings=(Setting("lock"),),
    plan=_plan,
    failure=_failure,
    initial_reported={"lock_state": "locked", "door": "closed"},
    counts=(
        StateCount("locks", "lock_state", ("locked",)),
        StateCount("unlocks", "lock_state", ("unlocked",)),
        StateCount("lock_operations", "lock_state", ("locked", "unlocked")),
        StateCount("jams", "lock_state", ("jammed",)),
        StateCount("door_opens", "door", ("open",)),
    ),
)
