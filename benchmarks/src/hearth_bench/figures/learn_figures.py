"""The learn bench's figures: what a learned program and preheat would have done in weeks the learner did not
see, replayed in plain Python from the simulated household (``hearth bench learn``).

Pure: no broker, no Spark, no clock. The evaluation may read the simulator's ground truth (the
household's routine and manual changes, each room's physics and outdoor series); the learner read only
journal facts. Per room (a home's thermostat), over the held-out span:

* **Manual changes made unnecessary** (``ProgramTimeline.made_unnecessary``): a change the household
  made by hand is unnecessary under a program if, at some moment within ``WINDOW_S`` (30 minutes) of
  it, before or after, the program's target in force is within ``TOLERANCE_C`` (0.5 °C) of the
  change's target: the program sets it about then, or had set it already. The share is over every
  manual change of the held-out weeks (odd days and away weeks included: a program cannot know them).
* **Replays** (``replay``): the room's own physics (``SimThermostat``, the simulator's thermal model,
  with the home's held-out outdoor series; its control keeps the room between the target and
  ``HYSTERESIS_C`` below it), stepped a minute at a time from the household's routine target. Targets
  change at the program's transitions, and at the manual changes the program did *not* make
  unnecessary (an away week, an odd day), each of which holds until the program's next transition, as
  a person's command holds a schedule in Hearth (``hearth_shared.domain.schedule_hold``).
* **Preheat** (``replay(..., response)``): the scheduler's rule (``hearth_shared.domain.preheat``,
  ``preheat_due``), looked at every minute: the next transition, if it raises the target and is
  within the households' cap (``cap_s``: a schedule's ``preheat_max_min``, by default the deployment's
  ``CAP_S``, 4 h), is sent once ``now >= its instant - lead``, the lead being
  ``room_response.preheat_lead`` from the *fitted* response, the room's reading now (0.1 °C, as
  reported) and the outdoor now. The rule is written out here rather than calling ``preheat_due``
  each minute: that looks the program up across days at every call, a thousand times too slow for a
  thousand rooms; the lead itself is the domain's function.
* **MissTime**: a comfort period starts at a transition's *programmed* instant when it raises the
  target, and lasts until the next change of target; its MissTime is the time from that instant until
  the room first comes within ``BAND_C`` (the thermostat's own 0.5 °C band) of the target, or until the
  period ends if it never does. After that the thermostat holds the band (its cycling is not a miss).
* **Heating hours**: time with ``hvac_action`` ``heating`` over the span.

Three replays per room: the household's own program (its routine as the simulator drew it, moved by
the room's offset: what it would write by hand; no preheat), the suggested program at its programmed
times, and the suggested program with preheat. A room with no suggestion has an empty program (every
manual change stays); one with no heating fit is not preheated.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from hearth_shared.domain.program_learning import COMMAND, WEEKDAYS, WEEKEND
from hearth_shared.domain.room_response import CAP_S, RoomResponse, preheat_lead
from hearth_shared.domain.schedule import ProgramEntry, ScheduledCommand, transitions, zone
from hearth_simulator.devices.sim_thermostat import SimThermostat
from hearth_simulator.history import History, Home, Room
from hearth_simulator.household import Change, Household, ManualChange, Routine
from hearth_simulator.outdoor import Outdoor

WINDOW_S = 30 * 60.0
TOLERANCE_C = 0.5
BAND_C = SimThermostat.HYSTERESIS_C
STEP_S = 60.0  # the replay's step, and how often the preheat rule looks (the scheduler's tick)
LOOKBACK_S = 7 * 86_400.0  # a weekly program's transition in force at the start lies within a week
GOAL_UNNECESSARY = 0.6
GOAL_MISS_CUT = 0.8
GOAL_HEATING_RATIO = 1.05


@dataclass(frozen=True)
class Span:
    """A stretch of time, epoch seconds, ``start`` included, ``end`` not."""

    start: float
    end: float

    def holds(self, t: float) -> bool:
        return self.start <= t < self.end


@dataclass(frozen=True)
class Setting:
    """A program's transition: the target it sets at ``t`` (epoch seconds)."""

    t: float
    target_c: float


def _moment(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


@dataclass(frozen=True)
class ProgramTimeline:
    """A program's transitions over a span (and the one in force at its start), in time order."""

    settings: tuple[Setting, ...]
    times: tuple[float, ...]

    @classmethod
    def of(cls, program: Sequence[ProgramEntry], time_zone: str, span: Span) -> ProgramTimeline:
        found: list[Setting] = []
        since, until = _moment(span.start - LOOKBACK_S), _moment(span.end)
        for t in transitions(list(program), zone(time_zone), since, until):
            target = t.command.params.get("target_c")
            if isinstance(target, int | float):
                found.append(Setting(t.instant.timestamp(), float(target)))
        return cls(tuple(found), tuple(s.t for s in found))

    def in_force(self, t: float) -> Setting | None:
        at = bisect.bisect_right(self.times, t)
        return self.settings[at - 1] if at else None

    def after(self, t: float) -> Setting | None:
        at = bisect.bisect_right(self.times, t)
        return self.settings[at] if at < len(self.settings) else None

    def made_unnecessary(self, change: ManualChange) -> bool:
        """The rule (module docstring): the target in force at ``t - WINDOW_S`` or set within the
        window around the change is within ``TOLERANCE_C`` of the change's."""
        first = bisect.bisect_right(self.times, change.t - WINDOW_S)
        last = bisect.bisect_right(self.times, change.t + WINDOW_S)
        nearby = self.settings[max(first - 1, 0) : last]
        return any(abs(s.target_c - change.target_c) <= TOLERANCE_C for s in nearby)

    def share_unnecessary(self, changes: Sequence[ManualChange]) -> float:
        """The share of ``changes`` the program makes unnecessary (NaN without changes)."""
        if not changes:
            return math.nan
        return sum(self.made_unnecessary(c) for c in changes) / len(changes)


def own_program(routine: Routine, offset_c: float) -> tuple[ProgramEntry, ...]:
    """The household's routine as the weekly program it would write by hand, in a room ``offset_c`` off
    the routine (its targets in the panel's 0.5 °C steps, as household.py moves a room's changes)."""

    def entry(days: tuple[str, ...], change: Change) -> ProgramEntry:
        minute = int(change.minute)
        target = math.floor((change.target_c + offset_c) * 2 + 0.5) / 2
        return ProgramEntry(
            days=days,
            at=f"{minute // 60:02d}:{minute % 60:02d}",
            command=ScheduledCommand(name=COMMAND, params={"target_c": target}),
        )

    return tuple(entry(WEEKDAYS, c) for c in routine.weekday) + tuple(
        entry(WEEKEND, c) for c in routine.weekend
    )


@dataclass(frozen=True)
class RoomPhysics:
    """A room's thermal model as the simulator draws it: its time constant, heater and outdoor."""

    insulation_h: float
    heat_c_per_h: float
    outdoor: Outdoor

    @classmethod
    def of(cls, room: Room) -> RoomPhysics:
        model = room.model
        return cls(model.insulation_s / 3600.0, model.heat_c_per_s * 3600.0, model.outdoor)


@dataclass(frozen=True)
class Replayed:
    """One replay of a room: heating time, MissTime (``unreached_s`` of it in comfort periods that ended
    before the room came within the band: a heater too weak for that target on that day), comfort
    periods and transitions preheated."""

    heating_s: float = 0.0
    miss_s: float = 0.0
    unreached_s: float = 0.0
    comfort_periods: int = 0
    preheats: int = 0
    preheats_capped: int = 0  # of them, with the longest lead allowed (the cap): the room needed more
    preheats_unreachable: int = 0  # ... and at the cap, as the room levels off below the target


class _Room:
    """A replay's running state: the model, what it has counted, the comfort period under way."""

    def __init__(self, model: SimThermostat, cap_s: int) -> None:
        self.model = model
        self.cap_s = cap_s  # the longest preheat lead the household allows
        self.heating_s = self.miss_s = self.unreached_s = 0.0
        self.periods = self.preheats = self.capped = self.unreachable = 0
        self.comfort: Setting | None = None  # the transition whose comfort period runs, not yet reached
        self.period_miss_s = 0.0  # the MissTime of that period so far
        self.early: tuple[float, float] | None = None  # a preheated transition: (instant, target before)

    def run_to(self, t: float) -> None:
        if t > self.model.clock:
            if self.model.hvac_action == "heating":
                self.heating_s += t - self.model.clock
            self.model.advance(t)

    def set_target(self, t: float, target_c: float) -> None:
        self.run_to(t)
        ok, reason = self.model.apply_command(COMMAND, {"target_c": target_c}, t)
        if not ok:
            raise ValueError(f"the replay's thermostat refused {target_c} °C: {reason}")

    def transition(self, s: Setting) -> None:
        if self.early is not None and self.early[0] == s.t:  # sent early already: not again
            before, self.early = self.early[1], None
        else:
            before = self.model.target_c
            self.set_target(s.t, s.target_c)
        raised = s.target_c > before and self.model.target_c == s.target_c
        self.end_period()
        if raised:
            self.comfort, self.period_miss_s = s, 0.0
            self.periods += 1

    def by_hand(self, change: ManualChange) -> None:
        self.set_target(change.t, change.target_c)
        self.end_period()

    def end_period(self) -> None:
        """The comfort period under way ends (another target is set, or the span ends) unreached."""
        if self.comfort is not None:
            self.unreached_s += self.period_miss_s
            self.comfort = None

    def preheat(self, now: float, following: Setting | None, response: RoomResponse) -> None:
        """The scheduler's preheat rule at ``now`` (module docstring)."""
        if following is None or following.t - now > self.cap_s or following.target_c <= self.model.target_c:
            return
        if self.early is not None and self.early[0] == following.t:
            return
        indoor, outdoor = round(self.model.reading_c, 1), round(self.model.outside_c(now), 1)
        plan = preheat_lead(response, indoor, outdoor, following.target_c, cap_s=self.cap_s)
        if plan.lead_s > 0 and now >= following.t - plan.lead_s:
            self.early = (following.t, self.model.target_c)
            self.set_target(now, following.target_c)
            self.preheats += 1
            self.capped += plan.reason == "capped"
            self.unreachable += plan.reason == "unreachable"

    def count_miss(self, t0: float, t1: float) -> None:
        comfort = self.comfort
        if comfort is None or t1 <= comfort.t:
            return
        if self.model.ambient >= comfort.target_c - BAND_C:
            self.comfort = None  # reached: the thermostat holds it from here
        else:
            missed = t1 - max(t0, comfort.t)
            self.miss_s += missed
            self.period_miss_s += missed


def replay(
    physics: RoomPhysics,
    span: Span,
    start_c: float,
    program: ProgramTimeline,
    by_hand: Sequence[ManualChange],
    response: RoomResponse | None = None,
    cap_s: int = CAP_S,
) -> Replayed:
    """The room over ``span`` under ``program`` and the manual changes it leaves (``by_hand``), from
    ``start_c``; with ``response``, its raising transitions preheated (module docstring)."""
    first = program.in_force(span.start)
    room = _Room(
        SimThermostat(
            seed=0,
            start=span.start,
            ambient_c=start_c,
            hvac_mode="heat",
            target_c=first.target_c if first is not None else start_c,
            insulation_h=physics.insulation_h,
            heat_c_per_h=physics.heat_c_per_h,
            outdoor=physics.outdoor,
        ),
        cap_s,
    )
    events: list[tuple[float, int, Setting | ManualChange]] = []  # in time order, a transition first
    events.extend((s.t, 0, s) for s in program.settings if span.holds(s.t))
    events.extend((c.t, 1, c) for c in by_hand if span.holds(c.t))
    events.sort(key=lambda e: (e[0], e[1]))
    t, k = span.start, 0
    while t < span.end:
        step_end = min(t + STEP_S, span.end)
        if response is not None:
            room.preheat(t, program.after(t), response)
        while k < len(events) and events[k][0] < step_end:
            event = events[k][2]
            k += 1
            if isinstance(event, Setting):
                room.transition(event)
            else:
                room.by_hand(event)
        room.run_to(step_end)
        room.count_miss(t, step_end)
        t = step_end
    room.end_period()
    return Replayed(
        room.heating_s, room.miss_s, room.unreached_s, room.periods,
        room.preheats, room.capped, room.unreachable,
    )  # fmt: skip


@dataclass(frozen=True)
class DeviceLearned:
    """What the learn job published for one thermostat: its suggested program (empty: none) in the zone
    the program is read in, and its fitted response (None: none)."""

    program: tuple[ProgramEntry, ...] = ()
    time_zone: str = "UTC"
    response: RoomResponse | None = None


@dataclass(frozen=True)
class RoomFigures:
    """One room over the held-out span: its manual changes, those each program makes unnecessary, what
    was learned for it, and its three replays."""

    device_id: str
    changes: int  # manual changes in the held-out span
    unnecessary_suggested: int
    unnecessary_own: int
    suggested: bool
    fitted: bool  # a heating response: preheat possible
    own: Replayed
    programmed: Replayed
    preheated: Replayed


def evaluate_room(
    room: Room, household: Household, held_out: Span, learned: DeviceLearned, cap_s: int = CAP_S
) -> RoomFigures:
    """One room's figures over the held-out span (module docstring)."""
    changes = [c for c in room.changes if held_out.holds(c.t)]
    physics = RoomPhysics.of(room)
    own = ProgramTimeline.of(own_program(household.routine, room.offset_c), household.time_zone, held_out)
    suggested = ProgramTimeline.of(learned.program, learned.time_zone, held_out)
    routine_now = own.in_force(held_out.start)
    start_c = routine_now.target_c if routine_now is not None else household.away_c
    left_by_own = [c for c in changes if not own.made_unnecessary(c)]
    left_by_suggested = [c for c in changes if not suggested.made_unnecessary(c)]
    fitted = learned.response is not None and learned.response.heating is not None
    return RoomFigures(
        device_id=room.device_id,
        changes=len(changes),
        unnecessary_suggested=len(changes) - len(left_by_suggested),
        unnecessary_own=len(changes) - len(left_by_own),
        suggested=bool(learned.program),
        fitted=fitted,
        own=replay(physics, held_out, start_c, own, left_by_own),
        programmed=replay(physics, held_out, start_c, suggested, left_by_suggested),
        preheated=replay(
            physics,
            held_out,
            start_c,
            suggested,
            left_by_suggested,
            learned.response if fitted else None,
            cap_s,
        ),
    )


def evaluate_homes(
    homes: Sequence[Home],
    held_out: Span,
    seed: int,
    learned: Mapping[str, DeviceLearned],
    cap_s: int = CAP_S,
) -> list[RoomFigures]:
    """Every room of ``homes`` (the simulator's ground truth for the held-out span, drawn again from the
    same seed: the same households, rooms and changes as the history written), their preheats at most
    ``cap_s`` early."""
    truth = History(homes, held_out.start, held_out.end, seq_base=0, seed=seed)
    return [
        evaluate_room(
            room,
            truth.households[room.home_id],
            held_out,
            learned.get(room.device_id, DeviceLearned()),
            cap_s,
        )
        for room in truth.rooms
    ]


@dataclass(frozen=True)
class Figures:
    """The bench's figures, summed over every room."""

    rooms: int
    suggested: int
    fitted: int
    changes: int
    unnecessary_suggested: int
    unnecessary_own: int
    miss_own_min: float
    miss_programmed_min: float
    miss_preheated_min: float
    unreached_preheated_min: float  # of it, in comfort periods the room never reached
    heating_own_h: float
    heating_programmed_h: float
    heating_preheated_h: float
    comfort_periods: int
    preheats: int
    preheats_capped: int
    preheats_unreachable: int

    @property
    def unnecessary_share(self) -> float:
        return self.unnecessary_suggested / self.changes if self.changes else math.nan

    @property
    def unnecessary_share_own(self) -> float:
        return self.unnecessary_own / self.changes if self.changes else math.nan

    @property
    def miss_cut(self) -> float:
        """The share of the programmed time's MissTime preheat removes (NaN when there was none)."""
        if not self.miss_programmed_min:
            return math.nan
        return 1.0 - self.miss_preheated_min / self.miss_programmed_min

    @property
    def heating_ratio(self) -> float:
        """Heating hours with the suggested program and preheat against the household's own program."""
        return self.heating_preheated_h / self.heating_own_h if self.heating_own_h else math.nan


def summarize(rooms: Sequence[RoomFigures]) -> Figures:
    return Figures(
        rooms=len(rooms),
        suggested=sum(r.suggested for r in rooms),
        fitted=sum(r.fitted for r in rooms),
        changes=sum(r.changes for r in rooms),
        unnecessary_suggested=sum(r.unnecessary_suggested for r in rooms),
        unnecessary_own=sum(r.unnecessary_own for r in rooms),
        miss_own_min=sum(r.own.miss_s for r in rooms) / 60.0,
        miss_programmed_min=sum(r.programmed.miss_s for r in rooms) / 60.0,
        miss_preheated_min=sum(r.preheated.miss_s for r in rooms) / 60.0,
        unreached_preheated_min=sum(r.preheated.unreached_s for r in rooms) / 60.0,
        heating_own_h=sum(r.own.heating_s for r in rooms) / 3600.0,
        heating_programmed_h=sum(r.programmed.heating_s for r in rooms) / 3600.0,
        heating_preheated_h=sum(r.preheated.heating_s for r in rooms) / 3600.0,
        comfort_periods=sum(r.programmed.comfort_periods for r in rooms),
        preheats=sum(r.preheated.preheats for r in rooms),
        preheats_capped=sum(r.preheated.preheats_capped for r in rooms),
        preheats_unreachable=sum(r.preheated.preheats_unreachable for r in rooms),
    )
