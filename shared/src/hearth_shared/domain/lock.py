"""The lock device type.

Commands ``lock`` {} and ``unlock`` {} desire ``lock_state`` "locked" / "unlocked". A lock refuses to
lock with its door open (``door_open``), and a jammed lock refuses every command (``device_jammed``)
until it reports a good state; a jam reported while a command is in flight fails that command.
"""

from __future__ import annotations

from collections.abc import Mapping

from hearth_shared.domain.device_type import CommandInvalid
from hearth_shared.domain.twin import Twin, same_as_reported
from hearth_shared.events import JSON, Event, LockDesiredStateSet

name = "lock"
settings: Mapping[str, type[Event]] = {"lock": LockDesiredStateSet}

TARGET_STATE = {"lock": "locked", "unlock": "unlocked"}


def initial_reported() -> JSON:
    return {"lock_state": "locked", "door": "closed"}


def validate(command: str, params: JSON) -> JSON:
    if command not in TARGET_STATE:
        raise CommandInvalid("unknown_command", f"a lock has no command {command!r}")
    if params:
        raise CommandInvalid("invalid_params", f"{command} takes no params")
    return {}


def plan(twin: Twin, command: str, params: JSON) -> tuple[str, JSON]:
    if twin.reported.get("lock_state") == "jammed":
        raise CommandInvalid("device_jammed", "the lock is jammed; it takes commands again once unjammed")
    if command == "lock" and twin.reported.get("door") == "open":
        raise CommandInvalid("door_open", "cannot lock while the door is open")
    return "lock", {"lock_state": TARGET_STATE[command]}


def converged(desired: JSON, reported: JSON) -> bool:
    return same_as_reported(desired, reported)


def failure(reported: JSON) -> str | None:
    return "device_jammed" if reported.get("lock_state") == "jammed" else None
