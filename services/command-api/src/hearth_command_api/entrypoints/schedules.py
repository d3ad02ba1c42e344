"""Writes for homes that act on their own (../shared/CONTRACT.md): a home's time zone, a device's weekly
program, ending a hold, and deciding on a suggested program. Each is one fact on the home journal
(``hearth_shared.domain.home_facts``); the automations service turns programs into commands, and the
query API shows them (GET .../schedule).

A program is checked whole before anything is written: its days and times (``check_program``) and each
entry's command against the device's type (``validate_command``, what a command sent by hand must pass),
so a transition is never refused later for what could be known now. A 422 points at the entry.

A suggestion (``schedule.suggested``, the learning job's) is accepted or rejected with one fact naming it
(``schedule.suggestion_accepted`` / ``_rejected``, fact id derived from the suggestion and the decision,
so a retry writes the same fact). This API does not fold the home journal, so it does not know the
suggestion: every fold of the home journal (``HomesView``: the query API, the automations service) applies
an accept of the device's open suggestion as a ``schedule.set`` of its program at that fact, and ignores a
decision on one that is not open there. ``GET .../schedule/suggestions`` (query API) shows the outcome.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Path, status
from pydantic import BaseModel, ConfigDict, Field

from hearth_command_api.entrypoints.deps import Book, CurrentPrincipal, Writer, require_home
from hearth_command_api.entrypoints.schemas import CommandBody, DeviceId
from hearth_shared.domain import CommandInvalid, validate_command
from hearth_shared.domain.home_facts import (
    DecisionPayload,
    HomeTimezoneSet,
    ProgramPayload,
    ScheduleResumed,
    ScheduleSet,
    ScheduleSuggestionAccepted,
    ScheduleSuggestionRejected,
    TimezonePayload,
)
from hearth_shared.domain.schedule import (
    SCHEDULE_NAMESPACE,
    ProgramEntry,
    ScheduledCommand,
    ScheduleInvalid,
    check_program,
    zone,
)
from hearth_shared.schema.events import new_id, utcnow
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.web.http import not_found
from hearth_shared.web.http_errors import error_responses, unprocessable

MAX_PREHEAT_MIN = 12 * 60  # as the operator's HEARTH_AUTOMATIONS_PREHEAT_MAX_S allows at most

router = APIRouter(prefix="/v1")

HomeId = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description="The home's id")]


class HomeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timezone: str = Field(
        min_length=1, max_length=64, examples=["Europe/Berlin"], description="An IANA time zone"
    )


class ProgramCommandBody(CommandBody):
    """The command a program entry sends (checked like a device's command)."""


class ProgramEntryBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    days: list[str] = Field(min_length=1, max_length=7, examples=[["mon", "tue", "wed", "thu", "fri"]])
    at: str = Field(max_length=8, examples=["06:30"], description="Local time HH:MM (HH:MM:SS also taken)")
    command: ProgramCommandBody
    preheat: bool | None = Field(
        None,
        description="Start early enough, by the room's learned response, to reach a raised target at "
        "`at` (default: the program's `preheat`)",
    )


class ScheduleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    program: list[ProgramEntryBody] = Field(max_length=64, description="An empty program ends the schedule")
    preheat: bool = Field(
        False,
        description="Every transition that raises a target starts early enough, by the room's learned "
        "response, to reach it at its time (at most `preheat_max_min` early); an entry's own `preheat` wins",
    )
    preheat_max_min: int | None = Field(
        None,
        ge=0,
        le=MAX_PREHEAT_MIN,
        description="The longest a preheat may start early, in minutes (default: the deployment's, 4 h); a "
        "room that needs longer starts then, and its run says how long it needed",
    )


@router.put(
    "/homes/{home_id}",
    summary="Set a home's time zone (schedules and time triggers run in it; UTC until set)",
    responses=error_responses(400, 401, 403, 413),
)
async def put_home(
    home_id: HomeId, body: HomeBody, principal: CurrentPrincipal, writer: Writer
) -> dict[str, str]:
    require_home(principal, home_id)
    try:
        zone(body.timezone)
    except ScheduleInvalid as exc:
        raise unprocessable(("body", "timezone"), exc.reason, exc.message) from exc
    now = utcnow()
    fact = HomeTimezoneSet(
        fact_id=new_id(), home_id=home_id, occurred_at=now, recorded_at=now,
        payload=TimezonePayload(timezone=body.timezone),
    )  # fmt: skip
    await writer.append_home(fact)
    return {"home_id": home_id, "timezone": body.timezone}


@router.put(
    "/devices/{device_id}/schedule",
    summary="Give a device a weekly program (each transition is a command like any other)",
    description="A person's own command holds the device until the next transition; "
    "`POST .../schedule/resume` ends a hold at once. Skipped local times (DST) fire at the end of the gap, "
    "repeated ones at their first occurrence.",
    responses=error_responses(400, 401, 404, 413),
)
async def put_schedule(
    device_id: DeviceId, body: ScheduleBody, principal: CurrentPrincipal, writer: Writer, book: Book
) -> dict[str, Any]:
    device = book.devices.get(device_id)
    if device is None or not principal.may_see(device.home_id):
        raise not_found(f"device {device_id}")
    program: list[ProgramEntry] = []
    for i, entry in enumerate(body.program):
        try:
            params = validate_command(device.device_type, entry.command.name, entry.command.params)
        except CommandInvalid as exc:
            raise unprocessable(("body", "program", i, "command"), exc.reason, exc.message) from exc
        program.append(
            ProgramEntry(
                days=tuple(entry.days),
                at=entry.at,
                command=ScheduledCommand(name=entry.command.name, params=params),
                preheat=body.preheat if entry.preheat is None else entry.preheat,
            )
        )
    try:
        check_program(program)
    except ScheduleInvalid as exc:
        raise unprocessable(("body", "program", *exc.where), exc.reason, exc.message) from exc
    now = utcnow()
    fact = ScheduleSet(
        fact_id=new_id(), home_id=device.home_id, device_id=device_id, occurred_at=now, recorded_at=now,
        payload=ProgramPayload(
            program=tuple(program), device_type=device.device_type,
            preheat_max_s=None if body.preheat_max_min is None else body.preheat_max_min * 60,
        ),
    )  # fmt: skip
    await writer.append_home(fact)
    return {
        "device_id": device_id, "home_id": device.home_id, "program": [_entry_json(e) for e in program],
        "preheat_max_min": body.preheat_max_min,
    }  # fmt: skip


@router.post(
    "/devices/{device_id}/schedule/resume",
    status_code=status.HTTP_202_ACCEPTED,
    summary="End a hold at once: the transition in force is applied again",
    responses=error_responses(400, 401, 404, 413),
)
async def resume_schedule(
    device_id: DeviceId, principal: CurrentPrincipal, writer: Writer, book: Book
) -> dict[str, Any]:
    device = book.devices.get(device_id)
    if device is None or not principal.may_see(device.home_id):
        raise not_found(f"device {device_id}")
    now = utcnow()
    resume_id: uuid.UUID = new_id()
    fact = ScheduleResumed(
        fact_id=resume_id, home_id=device.home_id, device_id=device_id, occurred_at=now, recorded_at=now
    )
    await writer.append_home(fact)
    return {"device_id": device_id, "resume_id": str(resume_id)}


SuggestionId = Annotated[uuid.UUID, Path(description="The suggestion's id (`GET .../schedule/suggestions`)")]


async def _decide(
    device_id: str, suggestion_id: uuid.UUID, accepted: bool, principal: CurrentPrincipal, writer: Writer,
    book: Book,
) -> dict[str, Any]:  # fmt: skip
    device = book.devices.get(device_id)
    if device is None or not principal.may_see(device.home_id):
        raise not_found(f"device {device_id}")
    decision = "accepted" if accepted else "rejected"
    kind = ScheduleSuggestionAccepted if accepted else ScheduleSuggestionRejected
    now = utcnow()
    fact = kind(
        fact_id=uuid.uuid5(SCHEDULE_NAMESPACE, f"suggestion\n{suggestion_id}\n{decision}"),
        home_id=device.home_id, device_id=device_id, occurred_at=now, recorded_at=now,
        causation_id=suggestion_id, payload=DecisionPayload(suggestion_id=suggestion_id),
    )  # fmt: skip
    await writer.append_home(fact)
    return {"device_id": device_id, "suggestion_id": str(suggestion_id), "decision": decision}


@router.post(
    "/devices/{device_id}/schedule/suggestions/{suggestion_id}/accept",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Accept a suggested program: it becomes the device's program (as a PUT of it would)",
    description="Recorded as a `schedule.suggestion_accepted` fact; only the device's open suggestion is "
    "taken (`GET .../schedule/suggestions` on the query API shows its status).",
    responses=error_responses(400, 401, 404, 413),
)
async def accept_suggestion(
    device_id: DeviceId, suggestion_id: SuggestionId, principal: CurrentPrincipal, writer: Writer, book: Book
) -> dict[str, Any]:
    return await _decide(device_id, suggestion_id, True, principal, writer, book)


@router.post(
    "/devices/{device_id}/schedule/suggestions/{suggestion_id}/reject",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Reject a suggested program: the schedule stays as it is, and it is not suggested again",
    responses=error_responses(400, 401, 404, 413),
)
async def reject_suggestion(
    device_id: DeviceId, suggestion_id: SuggestionId, principal: CurrentPrincipal, writer: Writer, book: Book
) -> dict[str, Any]:
    return await _decide(device_id, suggestion_id, False, principal, writer, book)


def _entry_json(entry: ProgramEntry) -> dict[str, Any]:
    return {
        "days": list(entry.days),
        "at": entry.at,
        "command": {"name": entry.command.name, "params": entry.command.params},
        **({"preheat": True} if entry.preheat else {}),  # shown when set, as the request may say it
    }
