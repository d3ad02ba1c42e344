"""Preheat: a program entry with ``preheat: true`` whose command raises the target starts early enough
for the room to reach that target at the programmed time.

Pure: the scheduler (``hearth_automations.service.scheduler``) asks ``preheat_due(state, now, ...)`` each
tick, with the room's latest learned response (``room.response_fitted``, folded by ``HomesView``) and the
device's latest reported state (``ambient_c``, ``outdoor_c``, ``target_c``).

* Only the **next** transition is looked at, and only within ``cap_s`` (4 h, ``CAP_S``) of it: the lead is
  computed again at every look from the temperatures now (``room_response.preheat_lead``), so a cold
  night lengthens it and a warm afternoon shortens it, up to the moment it fires.
* It fires at ``instant - lead`` as that transition, with that transition's own command id
  (``transition_command_id(device, instant)``): the scheduler that fires it on time later, or a second
  scheduler, sends the very same command, recorded once; and ``last_fired`` becomes the programmed
  instant, so it does not fire again at its time.
* A held device is not preheated before its hold ends (the hold lasts until that transition's instant
  at the earliest, which is exactly the transition preheat would start); nor is a transition that does
  not raise the target (its ``target_c`` at or below the device's reported ``target_c``: the room does
  not need heating to reach it).
* A preheat entry that fires on time (no response learned yet, no reading, the room warm enough) says
  so: its ``Preheat`` record has ``lead_s`` 0 and the reason (``missed_lead`` when it needed one: the
  scheduler was not running then).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from hearth_shared.domain.room_response import CAP_S, Preheat, RoomResponse, preheat_lead
from hearth_shared.domain.schedule import Transition, next_after, transition_command_id, zone
from hearth_shared.domain.schedule_hold import DeviceSchedule, Firing


def _number(state: Mapping[str, Any], key: str) -> float | None:
    value = state.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _raised_target(t: Transition, reported: Mapping[str, Any]) -> float | None:
    """The target ``t`` sets, if it raises the device's reported target (or none is known)."""
    target = _number(t.command.params, "target_c")
    if target is None:
        return None
    now_target = _number(reported, "target_c")
    return target if now_target is None or target > now_target else None


def lead_for(
    t: Transition,
    reported: Mapping[str, Any],
    response: RoomResponse | None,
    response_id: uuid.UUID | None,
    cap_s: int,
) -> Preheat | None:
    """The preheat of transition ``t`` from the temperatures now (None: it does not raise a target)."""
    target = _raised_target(t, reported)
    if target is None:
        return None
    return preheat_lead(
        response, _number(reported, "ambient_c"), _number(reported, "outdoor_c"), target,
        cap_s=cap_s, response_id=response_id,
    )  # fmt: skip


def preheat_due(
    state: DeviceSchedule,
    now: datetime,
    reported: Mapping[str, Any],
    response: RoomResponse | None,
    response_id: uuid.UUID | None = None,
    cap_s: int = CAP_S,
) -> Firing | None:
    """The next transition, to send now because its room needs the time until it (module docstring)."""
    if not state.program or state.set_at is None:
        return None
    following = next_after(list(state.program), zone(state.timezone), now)
    if following is None or not state.program[following.entry].preheat:
        return None
    if following.instant - now > timedelta(seconds=cap_s) or following.instant <= state.set_at:
        return None
    if state.last_fired is not None and following.instant <= state.last_fired:
        return None
    if state.hold_until is not None and following.instant < state.hold_until:
        return None
    plan = lead_for(following, reported, response, response_id, cap_s)
    if plan is None or plan.lead_s <= 0 or now < following.instant - timedelta(seconds=plan.lead_s):
        return None
    return Firing(
        transition=following,
        command_id=transition_command_id(state.device_id, following.instant),
        reason="preheat",
        preheat=plan,
    )


def on_time_record(
    firing: Firing,
    state: DeviceSchedule,
    reported: Mapping[str, Any],
    response: RoomResponse | None,
    response_id: uuid.UUID | None,
    cap_s: int = CAP_S,
) -> Firing:
    """A preheat entry's transition sent at its time: why it did not start early, in its record."""
    if firing.preheat is not None or not state.program[firing.transition.entry].preheat:
        return firing
    plan = lead_for(firing.transition, reported, response, response_id, cap_s)
    if plan is None:
        return firing
    return Firing(
        transition=firing.transition,
        command_id=firing.command_id,
        reason=firing.reason,
        preheat=Preheat(
            lead_s=0,
            reason=plan.reason if plan.lead_s == 0 else "missed_lead",
            target_c=plan.target_c,
            indoor_c=plan.indoor_c,
            outdoor_c=plan.outdoor_c,
            rate_c_per_h=plan.rate_c_per_h,
            response_id=plan.response_id,
            needed_s=plan.needed_s,
            reachable_c=plan.reachable_c,
        ),
    )
