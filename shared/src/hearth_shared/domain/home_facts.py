"""Facts about homes rather than one device: time zones, schedules, holds, transitions fired,
notification settings. They live in the **home journal** topic (``Topics.home_journal``), keyed by
``home_id``, so everything about one home is in one partition, in order, and a process that owns a
partition owns those homes (the automations service scales by home this way).

Why not the device journal: its facts are numbered per device by their one writer, the device actor; a
home's settings and a scheduler's decisions have no device version to take. Their envelope is small:
``fact_id``, wire ``type``, ``home_id``, ``device_id`` (for a device's schedule), ``occurred_at``,
``recorded_at``, ``causation_id``, ``payload``.

Writers: the command API (what a person declares: a zone, a program, a resume, a suggestion accepted or
rejected), the automations service (what it decided: a transition fired, a hold) and the learning job
(``hearth_analytics.jobs.learn``: a program suggested, a room's response fitted; fact ids derived from
what was learned, so a re-run on the same evidence writes nothing new). Fact ids are derived where a
repeat must be the same fact (a transition's fact id is its command id, so two schedulers firing it
write one fact id and folding it twice changes nothing). Pure: msgspec structs and codecs, no I/O.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Union

import msgspec

from hearth_shared.domain.automation import Automation
from hearth_shared.domain.program_learning import EntryEvidence, SuggestionEvidence
from hearth_shared.domain.room_response import Preheat, RoomResponse
from hearth_shared.domain.schedule import ProgramEntry, ScheduledCommand
from hearth_shared.schema.events import MalformedRecord


class HomeFact(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    fact_id: uuid.UUID
    schema_version: int = 1
    home_id: str
    device_id: str | None = None
    occurred_at: datetime
    recorded_at: datetime
    causation_id: uuid.UUID | None = None


class TimezonePayload(msgspec.Struct, frozen=True, kw_only=True):
    timezone: str


class HomeTimezoneSet(HomeFact, frozen=True, kw_only=True, tag="home.timezone_set"):
    payload: TimezonePayload


class NotificationsPayload(msgspec.Struct, frozen=True, kw_only=True):
    webhook_url: str
    secret: str  # signs the webhooks (HMAC-SHA256); the receiver holds the same


class HomeNotificationsSet(HomeFact, frozen=True, kw_only=True, tag="home.notifications_set"):
    payload: NotificationsPayload


class ProgramPayload(msgspec.Struct, frozen=True, kw_only=True):
    program: tuple[ProgramEntry, ...]
    device_type: str
    preheat_max_s: int | None = None  # the household's longest preheat lead (None: the operator's default)


class ScheduleSet(HomeFact, frozen=True, kw_only=True, tag="schedule.set"):
    """A device's program (an empty program ends the schedule)."""

    payload: ProgramPayload


class ScheduleResumed(HomeFact, frozen=True, kw_only=True, tag="schedule.resumed"):
    """A person ended a hold: the transition in force is applied again (fact_id names this resume)."""

    payload: dict[str, Any] = {}


class HoldPayload(msgspec.Struct, frozen=True, kw_only=True):
    command_id: uuid.UUID  # the person's command
    hold_until: datetime


class ScheduleHoldStarted(HomeFact, frozen=True, kw_only=True, tag="schedule.hold_started"):
    payload: HoldPayload


class FiredPayload(msgspec.Struct, frozen=True, kw_only=True):
    command_id: uuid.UUID
    instant: datetime  # the transition's scheduled instant (UTC)
    local: datetime  # the same in the home's zone, with its offset
    entry: int
    reason: str  # "transition" | "resume" | "preheat" (sent ``preheat.lead_s`` before ``instant``)
    command: ScheduledCommand
    preheat: Preheat | None = None  # for an entry with preheat: how early and why


class ScheduleTransitionFired(HomeFact, frozen=True, kw_only=True, tag="schedule.transition_fired"):
    """The scheduler sent a transition's command (fact_id = command_id)."""

    payload: FiredPayload


class SuggestionPayload(msgspec.Struct, frozen=True, kw_only=True):
    device_type: str
    program: tuple[ProgramEntry, ...]
    evidence: SuggestionEvidence
    entries: tuple[EntryEvidence, ...] = ()  # per program entry, in its order


class ScheduleSuggested(HomeFact, frozen=True, kw_only=True, tag="schedule.suggested"):
    """A program learned from the device's manual changes (fact_id = suggestion_id, derived from device
    and program). It changes no schedule: only ``schedule.suggestion_accepted`` does."""

    payload: SuggestionPayload


class DecisionPayload(msgspec.Struct, frozen=True, kw_only=True):
    suggestion_id: uuid.UUID


class ScheduleSuggestionAccepted(HomeFact, frozen=True, kw_only=True, tag="schedule.suggestion_accepted"):
    """A person accepted a suggestion: the device's program is now the suggested one, from this fact on,
    exactly as a ``schedule.set`` of that program (``HomesView`` folds it so)."""

    payload: DecisionPayload


class ScheduleSuggestionRejected(HomeFact, frozen=True, kw_only=True, tag="schedule.suggestion_rejected"):
    payload: DecisionPayload


class RoomResponseFitted(HomeFact, frozen=True, kw_only=True, tag="room.response_fitted"):
    """A room's heating, cooling and idle response, fitted on its thermostat's reports (fact_id derived
    from device and the response): what preheat leads are computed from."""

    payload: RoomResponse


class AutomationCreated(HomeFact, frozen=True, kw_only=True, tag="automation.created"):
    """fact_id = automation_id."""

    payload: Automation


class SwitchPayload(msgspec.Struct, frozen=True, kw_only=True):
    automation_id: uuid.UUID
    enabled: bool


class AutomationSwitched(HomeFact, frozen=True, kw_only=True, tag="automation.switched"):
    """On (also after a suspension) or off, by a person."""

    payload: SwitchPayload


class SuspendedPayload(msgspec.Struct, frozen=True, kw_only=True):
    automation_id: uuid.UUID
    reason: str  # "own_action" | "too_many_runs"
    detail: str
    trigger_fact_id: uuid.UUID


class AutomationSuspended(HomeFact, frozen=True, kw_only=True, tag="automation.suspended"):
    """The loop breaker stopped it; it runs again once switched on."""

    payload: SuspendedPayload


class ActionRecord(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    kind: str  # "command" | "notify"
    action_id: uuid.UUID  # the command id, or the notification's dedupe key
    device_id: str | None = None
    name: str | None = None
    skipped: str | None = None  # why a command was not sent ("quarantined"), None when it was
    detail: str = ""  # the skip's detail (the quarantine's reason)


class TriggerRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The fact that triggered a run; for a time trigger, ``type`` "time", ``fact_id`` derived from
    (automation, instant) (``hearth_shared.domain.automation.time_trigger_id``), no device, ``occurred_at``
    the instant. ``due_at``: when a delayed trigger was due (a state held ``for_s``: the edge + ``for_s``)."""

    fact_id: uuid.UUID
    type: str
    device_id: str
    occurred_at: datetime
    due_at: datetime | None = None


class RunPayload(msgspec.Struct, frozen=True, kw_only=True):
    automation_id: uuid.UUID
    run_id: uuid.UUID
    trigger: TriggerRecord
    conditions: tuple[bool, ...]
    fired: bool  # the conditions held and the mode admitted it: the actions were taken
    admission: str  # "start" | "drop" | "queue" (the mode's answer)
    actions: tuple[ActionRecord, ...] = ()


class AutomationRan(HomeFact, frozen=True, kw_only=True, tag="automation.ran"):
    """One run (fact_id = run_id): its trigger fact, the conditions' results, each action with its id."""

    payload: RunPayload


class NotificationPayload(msgspec.Struct, frozen=True, kw_only=True):
    notification_id: uuid.UUID  # the dedupe key: one alert, one notification
    automation_id: uuid.UUID | None
    attempts: int
    status: int | None = None  # the receiver's last HTTP status
    error: str = ""


class NotificationDelivered(HomeFact, frozen=True, kw_only=True, tag="notification.delivered"):
    payload: NotificationPayload


class NotificationGaveUp(HomeFact, frozen=True, kw_only=True, tag="notification.gave_up"):
    payload: NotificationPayload


HOME_FACT_TYPES: tuple[type[HomeFact], ...] = (
    HomeTimezoneSet,
    HomeNotificationsSet,
    ScheduleSet,
    ScheduleResumed,
    ScheduleHoldStarted,
    ScheduleTransitionFired,
    ScheduleSuggested,
    ScheduleSuggestionAccepted,
    ScheduleSuggestionRejected,
    RoomResponseFitted,
    AutomationCreated,
    AutomationSwitched,
    AutomationSuspended,
    AutomationRan,
    NotificationDelivered,
    NotificationGaveUp,
)
AnyHomeFact = Union[HOME_FACT_TYPES]  # type: ignore[valid-type]  # noqa: UP007

_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(AnyHomeFact)
encode_home_fact = msgspec.json.Encoder().encode


def decode_home_fact(data: bytes | str | None) -> HomeFact:
    """One home-journal record; ``MalformedRecord`` with a reason for anything else."""
    if data is None:
        raise MalformedRecord("no_value", "the record has no value (a tombstone)")
    try:
        fact: HomeFact = _decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        raise MalformedRecord("invalid_home_fact", str(exc) or type(exc).__name__) from exc
    return fact
