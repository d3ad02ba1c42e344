"""Writes for homes that act on their own (../shared/CONTRACT.md): a home's time zone, a device's weekly
program, and ending a hold. Each is one fact on the home journal (``hearth_shared.domain.home_facts``); the
automations service turns programs into commands, and the query API shows them (GET .../schedule).

A program is checked whole before anything is written: its days and times (``check_program``) and each
entry's command against the device's type (``validate_command``, what a command sent by hand must pass),
so a transition is never refused later for what could be known now. A 422 points at the entry.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Path, status
from pydantic import BaseModel, ConfigDict, Field

from hearth_command_api.deps import Book, CurrentPrincipal, Writer, require_home
from hearth_command_api.schemas import CommandBody, DeviceId
from hearth_shared.domain import CommandInvalid, validate_command
from hearth_shared.domain.home_facts import (
    HomeTimezoneSet,
    ProgramPayload,
    ScheduleResumed,
    ScheduleSet,
    TimezonePayload,
)
from hearth_shared.domain.schedule import ProgramEntry, ScheduledCommand, ScheduleInvalid, check_program, zone
from hearth_shared.schema.events import new_id, utcnow
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.web.http import not_found
from hearth_shared.web.http_errors import error_responses, unprocessable

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


class ScheduleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    program: list[ProgramEntryBody] = Field(max_length=64, description="An empty program ends the schedule")


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
            )
        )
    try:
        check_program(program)
    except ScheduleInvalid as exc:
        raise unprocessable(("body", "program", *exc.where), exc.reason, exc.message) from exc
    now = utcnow()
    fact = ScheduleSet(
        fact_id=new_id(), home_id=device.home_id, device_id=device_id, occurred_at=now, recorded_at=now,
        payload=ProgramPayload(program=tuple(program), device_type=device.device_type),
    )  # fmt: skip
    await writer.append_home(fact)
    return {"device_id": device_id, "home_id": device.home_id, "program": [_entry_json(e) for e in program]}


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


def _entry_json(entry: ProgramEntry) -> dict[str, Any]:
    return {
        "days": list(entry.days),
        "at": entry.at,
        "command": {"name": entry.command.name, "params": entry.command.params},
    }
