"""A scheduled device's state and the scheduler's decisions about it: what fires now, holds, resume.

Pure: the scheduler process (``hearth_automations.service.scheduler``) folds facts into ``DeviceSchedule`` and
asks ``due(state, now)``; everything here takes the time it reasons about.

* Only transitions after the schedule was set fire (setting a program does not replay the past); a
  transition fires when it is the one **in force** and later than the last one fired. After an outage
  that is the transition in force now, once: the ones missed in between never fire.
* A person's own command (any command to the device that is not the scheduler's) **holds** the device
  until the next transition after it: ``hold_until`` is that transition's instant, and nothing earlier
  fires (so a catch-up after an outage does not undo what the person just set). The transition at
  ``hold_until`` fires as usual and ends the hold. ``resume`` ends a hold at once and re-applies the
  transition in force, with a command id of its own (``resume_command_id``).
* Which commands are the scheduler's: those whose id is ``transition_command_id(device, instant)`` for
  the transition in force when the command was requested, or one the state remembers firing.
* The latest firing of a preheat entry is kept (``last_preheat``: which entry, its programmed instant,
  how early it started and why), so a reader shows it beside the entry; a new program forgets it (its
  entries are others).
"""

from __future__ import annotations

import uuid
from datetime import datetime

import msgspec

from hearth_shared.domain.room_response import Preheat
from hearth_shared.domain.schedule import (
    ProgramEntry,
    Transition,
    in_force,
    next_after,
    resume_command_id,
    transition_command_id,
    zone,
)

REMEMBERED = 8  # command ids of recent firings kept, to know the scheduler's own commands


class LastPreheat(msgspec.Struct, frozen=True, kw_only=True):
    """The latest firing of a preheat entry: the entry (index into the program), its programmed instant,
    and its ``Preheat`` record (lead and reason)."""

    entry: int
    instant: datetime
    preheat: Preheat


def latest_preheat(
    known: LastPreheat | None, entry: int, instant: datetime, preheat: Preheat | None
) -> LastPreheat | None:
    """``known`` after a firing of ``entry`` at ``instant`` (one without a preheat record changes nothing;
    nor does an older one, folded again)."""
    if preheat is None or (known is not None and instant < known.instant):
        return known
    return LastPreheat(entry=entry, instant=instant, preheat=preheat)


class DeviceSchedule(msgspec.Struct, frozen=True, kw_only=True):
    device_id: str
    home_id: str
    program: tuple[ProgramEntry, ...] = ()
    timezone: str = "UTC"
    set_at: datetime | None = None  # transitions at or before this never fire
    last_fired: datetime | None = None  # the instant of the last transition fired
    hold_until: datetime | None = None
    held_by: uuid.UUID | None = None  # the command that holds it
    fired: tuple[str, ...] = ()  # command ids of recent firings
    last_preheat: LastPreheat | None = None  # the latest firing of a preheat entry
    preheat_max_s: int | None = None  # the household's longest preheat lead (None: the operator's default)


class Firing(msgspec.Struct, frozen=True, kw_only=True):
    """A transition to send now: the command id is derived, so sending it twice records it once."""

    transition: Transition
    command_id: uuid.UUID
    reason: str  # "transition" (on time or the one in force after an outage), "resume" or "preheat" (early)
    preheat: Preheat | None = None  # an entry with preheat: how early, and why


def due(state: DeviceSchedule, now: datetime) -> Firing | None:
    """The transition to send at ``now``, if any (each transition at most once)."""
    if not state.program or state.set_at is None:
        return None
    current = in_force(list(state.program), zone(state.timezone), now)
    if current is None or current.instant <= state.set_at:
        return None
    if state.last_fired is not None and current.instant <= state.last_fired:
        return None
    if state.hold_until is not None and current.instant < state.hold_until:
        return None
    return Firing(
        transition=current,
        command_id=transition_command_id(state.device_id, current.instant),
        reason="transition",
    )


def fired(state: DeviceSchedule, firing: Firing) -> DeviceSchedule:
    """The state once ``firing`` was sent: it never fires again, and a hold it reaches ends."""
    instant = firing.transition.instant
    hold_ends = state.hold_until is not None and instant >= state.hold_until
    return msgspec.structs.replace(
        state,
        last_fired=instant if state.last_fired is None else max(instant, state.last_fired),
        hold_until=None if hold_ends or firing.reason == "resume" else state.hold_until,
        held_by=None if hold_ends or firing.reason == "resume" else state.held_by,
        fired=(*state.fired, str(firing.command_id))[-REMEMBERED:],
        last_preheat=latest_preheat(state.last_preheat, firing.transition.entry, instant, firing.preheat),
    )


def is_own_command(state: DeviceSchedule, command_id: uuid.UUID, requested_at: datetime) -> bool:
    if str(command_id) in state.fired:
        return True
    if not state.program:
        return False
    current = in_force(list(state.program), zone(state.timezone), requested_at)
    return current is not None and transition_command_id(state.device_id, current.instant) == command_id


def hold(state: DeviceSchedule, command_id: uuid.UUID, at: datetime) -> DeviceSchedule | None:
    """The state held by a person's command at ``at``, or None when it changes nothing (no program, or
    the command already holds it)."""
    if not state.program or state.held_by == command_id:
        return None
    following = next_after(list(state.program), zone(state.timezone), at)
    if following is None:
        return None
    return msgspec.structs.replace(state, hold_until=following.instant, held_by=command_id)


def resume(state: DeviceSchedule, now: datetime, resumed_by: uuid.UUID) -> Firing | None:
    """End a hold at once: the transition in force now, again, under a command id of this resume."""
    if not state.program:
        return None
    current = in_force(list(state.program), zone(state.timezone), now)
    if current is None:
        return None
    return Firing(
        transition=current,
        command_id=resume_command_id(state.device_id, current.instant, resumed_by),
        reason="resume",
    )
