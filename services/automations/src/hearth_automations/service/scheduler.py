"""The scheduler: folds the home journal into ``DeviceSchedule``s (``HomesView``), notices holds in the
device journal, and sends due transitions through the command path.

Order of a firing: the command request goes to the inbox first (``KafkaWriter.send_requests``, the command
API's own path), then the ``schedule.transition_fired`` fact to the home journal. A crash between the two
means the fact is missing and the transition is due again on restart: it is sent again **with the same
command id** (derived from device and instant), and the device actor records a command id once. The
other order could lose a transition. Two schedulers owning the same home do the same: one command.

Holds: a ``command.requested`` fact in the device journal for a scheduled device, requested after the
last transition fired and not the scheduler's own, holds the device until the next transition
(``schedule.hold_started``). The journal is read from its start when the process starts, after the home
journal, so holds made while it was down are found; a command already covered by a later transition, or
a hold already recorded, changes nothing.

Resume: a ``schedule.resumed`` fact (the command API writes it) re-applies the transition in force under a
command id of that resume. A resume that arrives while the process replays (before it caught up) is
applied once it has (``pending_resumes``), unless a transition fired for it already. A resume leaves
``pending_resumes`` only once its command and fact are written, so a snapshot taken while it is sent
still holds it, and a restart sends it again under the same command id.

A write that fails (the inbox or the home journal) marks the scheduler ``broken`` and raises: the feed
that called it skips that record, so the service then takes no snapshot (``unsettled``) and stops, and
its restart reads that record again from the last snapshot's positions. Sends in flight need no such
care: what a snapshot taken meanwhile holds (the command remembered as the scheduler's own, the
transition not yet fired) makes a restart send it again under the same command id, recorded once.
``state``/``load_state``: the pending resumes, for that snapshot (the rest is the home view's; when to
look at each schedule again is derived).

Preheat (``hearth_shared.domain.preheat``): an entry with ``preheat`` is looked at every
``PREHEAT_LOOK_S`` from the cap before its transition (the schedule's ``preheat_max_s``, the household's,
else the operator's ``preheat_max_s``), and at the moment its lead from the temperatures of the last look
says it starts, if that comes sooner (a schedule set inside the window is not looked at on the minute of
its transition, so a look every minute alone would start it up to a minute late). A look that finds no
reading yet (a new device, or the journal's follower a moment behind the home journal's) looks again
``NO_READING_LOOK_S`` later, and a response learned wakes its schedule at once: neither waits a minute,
or until the transition's time when that comes sooner. It is sent as soon as the room's learned response
(the view's ``room.response_fitted``), from the device's temperatures now (``readings``: the engine's
latest reported state), says it needs the time left; its fact records how early and why.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

import msgspec

from hearth_shared.domain.home_facts import (
    FiredPayload,
    HoldPayload,
    HomeFact,
    RoomResponseFitted,
    ScheduleHoldStarted,
    ScheduleResumed,
    ScheduleTransitionFired,
)
from hearth_shared.domain.home_view import HomesView
from hearth_shared.domain.preheat import lead_for, on_time_record, preheat_due
from hearth_shared.domain.room_response import CAP_S, RoomResponse
from hearth_shared.domain.schedule import next_after, zone
from hearth_shared.domain.schedule_hold import (
    REMEMBERED,
    DeviceSchedule,
    Firing,
    due,
    hold,
    is_own_command,
    resume,
)
from hearth_shared.schema.events import CommandRequested, Event, SubmitCommand

log = logging.getLogger(__name__)

REQUEST_NAMESPACE = uuid.UUID("0d5f7c9a-31f4-4c8b-b7a6-52e1f0c3d9b4")
PREHEAT_LOOK_S = 60.0  # how often a coming preheat transition's lead is computed again
NO_READING_LOOK_S = 5.0  # ... and when the last look had no temperature to compute it from


def _no_readings(device_id: str) -> Mapping[str, Any]:
    return {}


class CommandPath(Protocol):
    """Where the scheduler's effects go: the inbox (commands) and the home journal (its facts)."""

    async def send_request(self, request: SubmitCommand) -> None: ...

    async def append(self, fact: HomeFact) -> None: ...


class SchedulerState(msgspec.Struct, kw_only=True):
    pending_resumes: list[ScheduleResumed] = []


class Scheduler:
    def __init__(
        self,
        view: HomesView,
        path: CommandPath,
        *,
        owns: Callable[[str], bool],
        clock: Callable[[], datetime],
        expires_in_s: float,
        readings: Callable[[str], Mapping[str, Any]] = _no_readings,
        preheat_max_s: int = CAP_S,
    ) -> None:
        self.view = view
        self.readings = readings
        self.preheat_max_s = preheat_max_s
        self.path = path
        self.owns = owns
        self.clock = clock
        self.expires_in = timedelta(seconds=expires_in_s)
        self.live = False  # set once both journals were read to their ends
        self.pending_resumes: dict[str, ScheduleResumed] = {}
        self._resuming: set[str] = set()  # devices whose resume is being sent
        self._wake: dict[str, datetime | None] = {}  # device -> when to look again (None: now)
        self.sent = 0
        self.broken: BaseException | None = None

    def state(self) -> SchedulerState:
        return SchedulerState(pending_resumes=list(self.pending_resumes.values()))

    def load_state(self, state: SchedulerState) -> None:
        self.pending_resumes = {fact.device_id or "": fact for fact in state.pending_resumes}
        self._wake = {}  # every schedule is looked at on the first tick

    def unsettled(self) -> str | None:
        """Why the state may hold what is not on the broker (a write failed), or None."""
        return None if self.broken is None else f"a scheduler write failed ({self.broken!r})"

    # ------------------------------------------------------------------------------------ the facts in

    async def on_home_fact(self, fact: HomeFact) -> None:
        if not self.owns(fact.home_id):
            return
        state = self.view.apply(fact)
        if state is None:
            if fact.device_id is None:  # a zone changed: every schedule of the home is looked at again
                self._wake.clear()
            elif isinstance(fact, RoomResponseFitted) and fact.device_id in self.view.schedules:
                self._wake[fact.device_id] = None  # a preheat's lead may start now
            return
        self._wake[state.device_id] = None
        if isinstance(fact, ScheduleResumed):
            self.pending_resumes[state.device_id] = fact
        elif isinstance(fact, ScheduleTransitionFired) and fact.payload.reason == "resume":
            self.pending_resumes.pop(state.device_id, None)
        if self.live:
            await self._resume_pending()

    async def on_journal_fact(self, event: Event) -> None:
        if not isinstance(event, CommandRequested) or not self.owns(event.home_id):
            return
        state = self.view.schedules.get(event.device_id)
        if state is None or state.set_at is None or event.occurred_at <= state.set_at:
            return
        if state.last_fired is not None and event.occurred_at < state.last_fired:
            return  # a later transition already replaced what that command set
        command_id = event.payload.command_id
        if is_own_command(state, command_id, event.occurred_at):
            return
        held = hold(state, command_id, event.occurred_at)
        if held is None or held.hold_until is None:
            return
        fact = ScheduleHoldStarted(
            fact_id=uuid.uuid5(REQUEST_NAMESPACE, f"hold\n{command_id}"),
            home_id=state.home_id,
            device_id=state.device_id,
            occurred_at=event.occurred_at,
            recorded_at=self.clock(),
            causation_id=event.event_id,
            payload=HoldPayload(command_id=command_id, hold_until=held.hold_until),
        )
        await self._written(self.path.append(fact))
        self.view.apply(fact)
        self._wake[state.device_id] = None
        log.info("schedule of %s held by command %s until %s", state.device_id, command_id, held.hold_until)

    async def _written(self, write: Awaitable[None]) -> None:
        try:
            await write
        except Exception as error:
            self.broken = error
            raise

    # --------------------------------------------------------------------------------- the time passing

    async def go_live(self) -> None:
        self.live = True
        await self._resume_pending()

    async def tick(self) -> int:
        """Send every transition due now; returns how many were sent."""
        now = self.clock()
        sent = 0
        for device_id, state in list(self.view.schedules.items()):
            wake = self._wake.get(device_id, None)
            if (wake is not None and now < wake) or not self.owns(state.home_id):
                continue
            firing = self._due(state, now)
            if firing is not None:
                await self._send(state, firing, now)
                sent += 1
            self._wake[device_id] = self._next_look(self.view.schedules[device_id], now)
        return sent

    def _due(self, state: DeviceSchedule, now: datetime) -> Firing | None:
        """The transition in force if it is due, else the next one if its preheat starts now."""
        response, response_id = self._response(state.device_id)
        reported = self.readings(state.device_id)
        firing = due(state, now)
        if firing is not None:
            return on_time_record(firing, state, reported, response, response_id, self._cap(state))
        return preheat_due(state, now, reported, response, response_id, self._cap(state))

    def _response(self, device_id: str) -> tuple[RoomResponse | None, uuid.UUID | None]:
        """The room's latest learned response and its fact's id (None, None: nothing learned yet)."""
        learned = self.view.responses.get(device_id)
        return (learned.payload, learned.fact_id) if learned else (None, None)

    def _cap(self, state: DeviceSchedule) -> int:
        """The longest preheat lead: the household's for this schedule, else the operator's default."""
        return self.preheat_max_s if state.preheat_max_s is None else state.preheat_max_s

    def _next_look(self, state: DeviceSchedule, now: datetime) -> datetime:
        following = next_after(list(state.program), zone(state.timezone), now) if state.program else None
        if following is None:
            return now + timedelta(days=1)
        if not state.program[following.entry].preheat:
            return following.instant
        window_opens = following.instant - timedelta(seconds=self._cap(state))
        if now < window_opens:
            return window_opens
        look = min(following.instant, now + timedelta(seconds=PREHEAT_LOOK_S))
        response, response_id = self._response(state.device_id)
        plan = lead_for(following, self.readings(state.device_id), response, response_id, self._cap(state))
        if plan is not None and plan.reason == "no_reading":
            return min(look, now + timedelta(seconds=NO_READING_LOOK_S))
        if plan is None or plan.lead_s <= 0:
            return look
        starts = following.instant - timedelta(seconds=plan.lead_s)  # if the temperatures hold till then
        return starts if now < starts < look else look

    async def _resume_pending(self) -> None:
        for device_id, fact in list(self.pending_resumes.items()):
            if device_id in self._resuming:
                continue  # another call is sending it
            self._resuming.add(device_id)
            try:
                state = self.view.schedules.get(device_id)
                now = self.clock()
                firing = None if state is None else resume(state, now, fact.fact_id)
                if state is not None and firing is not None:
                    await self._send(state, firing, now)
            finally:
                self._resuming.discard(device_id)
            if self.pending_resumes.get(device_id) is fact:
                del self.pending_resumes[device_id]

    async def _send(self, state: DeviceSchedule, firing: Firing, now: datetime) -> None:
        t = firing.transition
        # Known as its own before it is sent: the command's requested fact may be read back while the
        # transition_fired fact is still on its way, and must not be taken for a person's (a hold).
        remembered = (*state.fired, str(firing.command_id))[-REMEMBERED:]
        self.view.schedules[state.device_id] = msgspec.structs.replace(state, fired=remembered)
        request = SubmitCommand(
            request_id=uuid.uuid5(REQUEST_NAMESPACE, str(firing.command_id)),
            device_id=state.device_id,
            sent_at=now,
            home_id=state.home_id,
            command_id=firing.command_id,
            name=t.command.name,
            params=dict(t.command.params),
            expires_at=now + self.expires_in,
        )
        await self._written(self.path.send_request(request))
        fact = ScheduleTransitionFired(
            fact_id=firing.command_id,
            home_id=state.home_id,
            device_id=state.device_id,
            occurred_at=now,
            recorded_at=now,
            payload=FiredPayload(
                command_id=firing.command_id,
                instant=t.instant,
                local=t.local,
                entry=t.entry,
                reason=firing.reason,
                command=t.command,
                preheat=firing.preheat,
            ),
        )
        await self._written(self.path.append(fact))
        self.view.apply(fact)
        self.sent += 1
        early = f", {firing.preheat.lead_s} s early: {firing.preheat.reason}" if firing.preheat else ""
        log.info(
            "%s: %s %s (%s, %s%s)", state.device_id, t.command.name, t.command.params, t.local, firing.reason,
            early,
        )  # fmt: skip
