"""Homes folded from home-journal facts: each home's zone, notification settings, each scheduled
device's ``DeviceSchedule``, its suggested programs and its room's learned response. Pure and in
memory; the query API (GET schedule) and the scheduler fold the same facts with this one class, so what
the API shows is what the scheduler decides from.

Folding a fact twice changes nothing (a fired transition only moves ``last_fired`` forward, a hold
names its command), so a replay, or two schedulers writing the same fact, is harmless; and so is folding
again, after a restart from a snapshot, facts the snapshot already holds (what its owner folded before it
read them back from the home journal: the automations service applies its own facts as it decides).

Suggestions: a device's newest ``schedule.suggested`` is its open one (an older open one is dropped: the
household decides on what the learner found last); accepted and rejected ones are kept, the latest
``SUGGESTIONS_KEPT`` per device. ``schedule.suggestion_accepted`` of the device's open suggestion sets its
program exactly as a ``schedule.set`` of that program at that fact would: one fact holds the decision and
the change, so no reader sees one without the other. An accept or reject of a suggestion that is not
open for that device and home changes nothing. The room's response kept is the one fitted on the
latest readings (``fitted_to``).

Bounded by live state, not history: per automation, its latest ``runs_kept`` runs (the automations
service keeps more while it replays and fewer once live, see its app; the query API none: it reads runs
and outcomes from PostgreSQL, where the projector writes them); per home, its latest ``deliveries_kept``
delivery facts (0 in both services); and, with ``tracks_unsent``, the notify actions of recorded runs
that have no delivery fact yet (each leaves at its ``notification.delivered`` or
``notification.gave_up``, which the notifier writes once its run fact is in the journal, so a run fact is
always folded before its delivery fact; the automations service's notifier sends only those). Everything
else is per home, device or automation. A view that keeps none of them drops them from a snapshot it
restores too (one saved by a release that kept them).

Snapshots (``snapshot``/``restore``, or ``state``/``load_state`` inside a larger one): ``HomesViewState``,
a msgspec struct read back across releases (a new field gets a default; ``format`` changes only with a
reader for the old one), JSON so that a zone's offset on a datetime survives. The per-home index is
derived from the automations' creation order, not saved.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from datetime import datetime

import msgspec

from hearth_shared.domain.automation import Automation
from hearth_shared.domain.home_facts import (
    AutomationCreated,
    AutomationRan,
    AutomationSuspended,
    AutomationSwitched,
    HomeFact,
    HomeNotificationsSet,
    HomeTimezoneSet,
    NotificationDelivered,
    NotificationGaveUp,
    NotificationsPayload,
    ProgramPayload,
    RoomResponseFitted,
    RunPayload,
    ScheduleHoldStarted,
    ScheduleResumed,
    ScheduleSet,
    ScheduleSuggested,
    ScheduleSuggestionAccepted,
    ScheduleSuggestionRejected,
    ScheduleTransitionFired,
)
from hearth_shared.domain.schedule_hold import REMEMBERED, DeviceSchedule, latest_preheat
from hearth_shared.schema.snapshot_format import SnapshotCodec

DEFAULT_TIMEZONE = "UTC"
# The defaults (a view built for a backtest or a test): per automation, per home. The services choose their
# own: the query API keeps none (issue 20: history in its memory grew with the journal's age).
RUNS_KEPT = 20
DELIVERIES_KEPT = 100
SUGGESTIONS_KEPT = 5  # per device: the open one and the latest decided ones
VIEW_FORMAT = 1


class AutomationState(msgspec.Struct, kw_only=True):
    definition: Automation
    enabled: bool = True
    suspended: str | None = None  # the loop breaker's reason

    @property
    def active(self) -> bool:
        return self.enabled and self.suspended is None


Delivery = NotificationDelivered | NotificationGaveUp


class SuggestionState(msgspec.Struct, kw_only=True):
    suggestion: ScheduleSuggested
    status: str = "open"  # open | accepted | rejected
    decided_at: datetime | None = None


class HomesViewState(msgspec.Struct, kw_only=True):
    """What ``HomesView`` holds, as saved in a snapshot (lists keep their order)."""

    timezones: dict[str, str] = {}
    notifications: dict[str, NotificationsPayload] = {}
    schedules: list[DeviceSchedule] = []
    resumes: dict[str, datetime] = {}
    automations: list[AutomationState] = []  # in creation order
    runs: dict[uuid.UUID, list[RunPayload]] = {}  # per automation, oldest first
    deliveries: dict[str, list[Delivery]] = {}  # per home, oldest first
    unsent: dict[uuid.UUID, RunPayload] = {}
    suggestions: list[SuggestionState] = []  # every device's, each device's oldest first
    responses: list[RoomResponseFitted] = []


class HomesViewSnapshot(msgspec.Struct, kw_only=True):
    format: int
    view: HomesViewState


_CODEC = SnapshotCodec("home view", HomesViewSnapshot, VIEW_FORMAT, json=True)


class HomesView:
    def __init__(
        self,
        *,
        runs_kept: int = RUNS_KEPT,
        deliveries_kept: int = DELIVERIES_KEPT,
        tracks_unsent: bool = True,
    ) -> None:
        self.runs_kept = runs_kept
        self.deliveries_kept = deliveries_kept
        self.tracks_unsent = tracks_unsent
        self.timezones: dict[str, str] = {}
        self.notifications: dict[str, NotificationsPayload] = {}
        self.schedules: dict[str, DeviceSchedule] = {}
        self.resumes: dict[str, datetime] = {}  # device -> when it was last resumed
        self.automations: dict[uuid.UUID, AutomationState] = {}
        self._by_home: dict[str, dict[uuid.UUID, AutomationState]] = {}  # the same states, by home
        self.runs: dict[uuid.UUID, OrderedDict[uuid.UUID, RunPayload]] = {}
        self.deliveries: dict[str, OrderedDict[uuid.UUID, Delivery]] = {}
        self.unsent: dict[uuid.UUID, RunPayload] = {}  # notification id -> its run, until its outcome
        self.suggestions: dict[str, OrderedDict[uuid.UUID, SuggestionState]] = {}  # per device
        self.responses: dict[str, RoomResponseFitted] = {}  # per device

    # ------------------------------------------------------------------------------------ snapshots

    def state(self) -> HomesViewState:
        return HomesViewState(
            timezones=self.timezones,
            notifications=self.notifications,
            schedules=list(self.schedules.values()),
            resumes=self.resumes,
            automations=list(self.automations.values()),
            runs={aid: list(kept.values()) for aid, kept in self.runs.items()},
            deliveries={home: list(kept.values()) for home, kept in self.deliveries.items()},
            unsent=self.unsent,
            suggestions=[s for kept in self.suggestions.values() for s in kept.values()],
            responses=list(self.responses.values()),
        )

    def load_state(self, state: HomesViewState) -> None:
        """Replace everything with ``state`` (built whole first, then assigned), kept to this view's
        bounds."""
        automations = {s.definition.automation_id: s for s in state.automations}
        by_home: dict[str, dict[uuid.UUID, AutomationState]] = {}
        for aid, automation in automations.items():
            by_home.setdefault(automation.definition.home_id, {})[aid] = automation
        runs = {
            aid: OrderedDict((r.run_id, r) for r in kept[-self.runs_kept :])
            for aid, kept in state.runs.items()
            if self.runs_kept
        }
        deliveries = {
            home: OrderedDict((f.payload.notification_id, f) for f in kept[-self.deliveries_kept :])
            for home, kept in state.deliveries.items()
            if self.deliveries_kept
        }
        self.timezones, self.notifications = dict(state.timezones), dict(state.notifications)
        self.schedules = {s.device_id: s for s in state.schedules}
        self.resumes = dict(state.resumes)
        self.automations, self._by_home = automations, by_home
        unsent = dict(state.unsent) if self.tracks_unsent else {}
        self.runs, self.deliveries, self.unsent = runs, deliveries, unsent
        suggestions: dict[str, OrderedDict[uuid.UUID, SuggestionState]] = {}
        for kept in state.suggestions:
            s = kept.suggestion
            suggestions.setdefault(s.device_id or "", OrderedDict())[s.fact_id] = kept
        self.suggestions = suggestions
        self.responses = {f.device_id or "": f for f in state.responses}

    def snapshot(self) -> bytes:
        return _CODEC.encode(HomesViewSnapshot(format=VIEW_FORMAT, view=self.state()))

    def restore(self, data: bytes) -> None:
        self.load_state(_CODEC.decode(data).view)

    def keep_runs(self, runs_kept: int) -> None:
        """From now on keep ``runs_kept`` runs per automation; the older ones go now."""
        self.runs_kept = runs_kept
        if not runs_kept:
            self.runs.clear()
        for kept in self.runs.values():
            while len(kept) > runs_kept:
                kept.popitem(last=False)

    # ------------------------------------------------------------------------------------ reads

    def automations_of(self, home_id: str) -> list[AutomationState]:
        """The home's automations, in the order they were created (an index: the engine looks them up
        for every fact, and a scan of every home's was most of its time with 10,000 automations)."""
        return list(self._by_home.get(home_id, {}).values())

    def automation_count(self, home_id: str) -> int:
        """How many automations the home has (they are never removed: it changes only when one is made)."""
        return len(self._by_home.get(home_id, ()))

    def open_suggestion(self, device_id: str) -> SuggestionState | None:
        for kept in reversed(self.suggestions.get(device_id, {}).values()):
            if kept.status == "open":
                return kept
        return None

    def timezone(self, home_id: str) -> str:
        return self.timezones.get(home_id, DEFAULT_TIMEZONE)

    def apply(self, fact: HomeFact) -> DeviceSchedule | None:
        """Fold one fact; returns the device schedule it changed, if any."""
        if isinstance(fact, HomeTimezoneSet):
            self.timezones[fact.home_id] = fact.payload.timezone
            for device_id, known in self.schedules.items():
                if known.home_id == fact.home_id:
                    self.schedules[device_id] = msgspec.structs.replace(known, timezone=fact.payload.timezone)
            return None
        if isinstance(fact, HomeNotificationsSet):
            self.notifications[fact.home_id] = fact.payload
            return None
        if isinstance(fact, AutomationCreated | AutomationSwitched | AutomationSuspended | AutomationRan):
            self._apply_automation(fact)
            return None
        if isinstance(fact, NotificationDelivered | NotificationGaveUp):
            self.unsent.pop(fact.payload.notification_id, None)
            if self.deliveries_kept:
                kept = self.deliveries.setdefault(fact.home_id, OrderedDict())
                kept[fact.payload.notification_id] = fact
                while len(kept) > self.deliveries_kept:
                    kept.popitem(last=False)
            return None
        if isinstance(fact, ScheduleSuggestionAccepted):
            return self._accept(fact)
        if isinstance(fact, ScheduleSuggested | ScheduleSuggestionRejected | RoomResponseFitted):
            self._apply_learned(fact)
            return None
        return self._apply_schedule(fact)

    def _decided(
        self, fact: ScheduleSuggestionAccepted | ScheduleSuggestionRejected
    ) -> SuggestionState | None:
        """The open suggestion the decision names, of that device and home, marked decided (else None)."""
        of_device = self.suggestions.get(fact.device_id or "")
        kept = of_device.get(fact.payload.suggestion_id) if of_device is not None else None
        if kept is None or kept.status != "open" or kept.suggestion.home_id != fact.home_id:
            return None
        kept.status = "accepted" if isinstance(fact, ScheduleSuggestionAccepted) else "rejected"
        kept.decided_at = fact.occurred_at
        return kept

    def _accept(self, fact: ScheduleSuggestionAccepted) -> DeviceSchedule | None:
        kept = self._decided(fact)
        if kept is None:
            return None
        suggested = kept.suggestion.payload
        current = self.schedules.get(kept.suggestion.device_id or "")
        program = ProgramPayload(
            program=suggested.program,
            device_type=suggested.device_type,
            preheat_max_s=current.preheat_max_s if current else None,  # the household's, kept
        )
        return self._apply_schedule(
            ScheduleSet(
                fact_id=fact.fact_id,
                home_id=fact.home_id,
                device_id=fact.device_id,
                occurred_at=fact.occurred_at,
                recorded_at=fact.recorded_at,
                causation_id=fact.fact_id,
                payload=program,
            )
        )

    def _apply_learned(
        self, fact: ScheduleSuggested | ScheduleSuggestionRejected | RoomResponseFitted
    ) -> None:
        device_id = fact.device_id
        if device_id is None:
            return
        if isinstance(fact, ScheduleSuggestionRejected):
            self._decided(fact)
        elif isinstance(fact, RoomResponseFitted):
            known = self.responses.get(device_id)
            if known is None or fact.payload.fitted_to >= known.payload.fitted_to:
                self.responses[device_id] = fact
        else:
            kept = self.suggestions.setdefault(device_id, OrderedDict())
            if fact.fact_id in kept:
                return  # folded twice: changes nothing
            for older in [sid for sid, s in kept.items() if s.status == "open"]:
                del kept[older]  # the newest suggestion is the open one
            kept[fact.fact_id] = SuggestionState(suggestion=fact)
            while len(kept) > SUGGESTIONS_KEPT:
                kept.popitem(last=False)

    def _apply_schedule(self, fact: HomeFact) -> DeviceSchedule | None:
        if fact.device_id is None:
            return None
        state = self.schedules.get(fact.device_id)
        if isinstance(fact, ScheduleSet):
            state = DeviceSchedule(
                device_id=fact.device_id,
                home_id=fact.home_id,
                program=fact.payload.program,
                timezone=self.timezone(fact.home_id),
                set_at=fact.occurred_at,
                last_fired=state.last_fired if state else None,
                fired=state.fired if state else (),
                preheat_max_s=fact.payload.preheat_max_s,
            )
        elif state is None:
            return None
        elif isinstance(fact, ScheduleTransitionFired):
            p = fact.payload
            last = p.instant if state.last_fired is None else max(p.instant, state.last_fired)
            ends_hold = p.reason == "resume" or (
                state.hold_until is not None and p.instant >= state.hold_until
            )
            fired = state.fired if str(p.command_id) in state.fired else (*state.fired, str(p.command_id))
            state = msgspec.structs.replace(
                state,
                last_fired=last,
                hold_until=None if ends_hold else state.hold_until,
                held_by=None if ends_hold else state.held_by,
                fired=fired[-REMEMBERED:],
                last_preheat=latest_preheat(state.last_preheat, p.entry, p.instant, p.preheat),
            )
        elif isinstance(fact, ScheduleHoldStarted):
            state = msgspec.structs.replace(
                state, hold_until=fact.payload.hold_until, held_by=fact.payload.command_id
            )
        elif isinstance(fact, ScheduleResumed):
            self.resumes[fact.device_id] = fact.occurred_at
            state = msgspec.structs.replace(state, hold_until=None, held_by=None)
        else:
            return None
        self.schedules[fact.device_id] = state
        return state

    def _apply_automation(self, fact: HomeFact) -> None:
        if isinstance(fact, AutomationCreated):
            aid = fact.payload.automation_id
            created = self.automations.setdefault(aid, AutomationState(definition=fact.payload))
            self._by_home.setdefault(created.definition.home_id, {})[aid] = created
            return
        automation_id = fact.payload.automation_id  # type: ignore[attr-defined]
        state = self.automations.get(automation_id)
        if state is None or state.definition.home_id != fact.home_id:
            return  # unknown, or named from another home: changes nothing
        if isinstance(fact, AutomationSwitched):
            state.enabled = fact.payload.enabled
            if fact.payload.enabled:
                state.suspended = None
        elif isinstance(fact, AutomationSuspended):
            state.suspended = fact.payload.reason
        elif isinstance(fact, AutomationRan):
            run = fact.payload
            if self.tracks_unsent:
                for action in run.actions:
                    if action.kind == "notify":
                        self.unsent[action.action_id] = run
            if not self.runs_kept:
                return
            runs = self.runs.setdefault(automation_id, OrderedDict())
            runs[run.run_id] = run
            while len(runs) > self.runs_kept:
                runs.popitem(last=False)
