"""Writes for automations and notifications (../shared/CONTRACT.md, "Homes that act on their own"):
``POST /v1/automations``, switching one on or off, and a home's webhook. Each is one fact on the home
journal; the automations service acts on them. An automation is checked whole before it is written: its
shape (``check_rule``: one trigger, a time trigger's days and time as a schedule entry's, ``for_s`` on the
trigger only), and every device it names must be one of the home's, and every command it
sends must pass the device type's own checks, as a command sent by hand does.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import msgspec
from fastapi import APIRouter, HTTPException, Path, status
from pydantic import AfterValidator, AnyHttpUrl, BaseModel, ConfigDict, Field

from hearth_command_api.entrypoints.deps import Book, CurrentPrincipal, Writer, require_home
from hearth_command_api.entrypoints.schedules import HomeId, ProgramCommandBody
from hearth_command_api.entrypoints.schemas import printable
from hearth_command_api.service.device_book import DeviceBook
from hearth_shared.domain import CommandInvalid, validate_command
from hearth_shared.domain.automation import MAX_FOR_S, Automation, RuleInvalid, check_rule
from hearth_shared.domain.home_facts import (
    AutomationCreated,
    AutomationSwitched,
    HomeNotificationsSet,
    NotificationsPayload,
    SwitchPayload,
)
from hearth_shared.schema.events import new_id, utcnow
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.web.http_errors import error_responses, unprocessable

router = APIRouter(prefix="/v1")

DeviceRef = Annotated[str, Field(pattern=IDENTIFIER_PATTERN)]
Text = Annotated[str, AfterValidator(printable)]  # one line, no control characters (hearth_shared.schema.ids)


class StateTestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device_id: DeviceRef
    key: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_]+$")
    above: float | None = Field(None, allow_inf_nan=False)
    below: float | None = Field(None, allow_inf_nan=False)
    equals: (
        Annotated[str, AfterValidator(printable), Field(max_length=200)]
        | Annotated[float, Field(allow_inf_nan=False)]
        | bool
        | None
    ) = None
    for_s: float | None = Field(
        None,
        gt=0,
        le=MAX_FOR_S,
        allow_inf_nan=False,
        description="A state trigger's only: fire once the test has held this many seconds (a report "
        "that breaks it first cancels it)",
    )


class TimeTriggerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    at: str = Field(max_length=8, examples=["07:30"], description="HH:MM (or HH:MM:SS) in the home's zone")
    days: list[str] | None = Field(
        None, min_length=1, max_length=7, examples=[["mon", "fri"]], description="Default: every day"
    )


class TriggerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fact: str | None = Field(
        None, max_length=64, pattern=r"^[a-z_]+\.[a-z_]+$", examples=["anomaly.detected"]
    )
    device_id: DeviceRef | None = None
    state: StateTestBody | None = None
    time: TimeTriggerBody | None = Field(
        None, description="At a wall-clock time in the home's zone, with the schedules' DST rules"
    )


class CommandActionBody(ProgramCommandBody):
    device_id: DeviceRef


class NotifyActionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: Text = Field(min_length=1, max_length=500)


class ActionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: CommandActionBody | None = None
    notify: NotifyActionBody | None = None


class AutomationBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    home_id: str = Field(pattern=IDENTIFIER_PATTERN)
    name: Text = Field(min_length=1, max_length=120)
    trigger: TriggerBody
    conditions: list[StateTestBody] = Field(default_factory=list, max_length=16)
    actions: list[ActionBody] = Field(min_length=1, max_length=16)
    mode: Literal["single", "restart", "queued", "parallel"] = "single"
    max_runs_per_minute: int = Field(20, ge=1, le=600, description="More runs in a minute suspend it")


class NotificationsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    webhook_url: AnyHttpUrl
    secret: Text = Field(min_length=16, max_length=256, description="Signs each webhook (HMAC-SHA256)")


def _check_devices(body: AutomationBody, book: DeviceBook) -> None:
    """Every device named is one of the home's; every command passes its type's checks."""
    named: list[tuple[tuple[str | int, ...], str]] = []
    if body.trigger.device_id:
        named.append((("body", "trigger", "device_id"), body.trigger.device_id))
    if body.trigger.state:
        named.append((("body", "trigger", "state", "device_id"), body.trigger.state.device_id))
    named += [(("body", "conditions", i, "device_id"), c.device_id) for i, c in enumerate(body.conditions)]
    for i, action in enumerate(body.actions):
        if action.command is not None:
            named.append((("body", "actions", i, "command", "device_id"), action.command.device_id))
    for loc, device_id in named:
        device = book.devices.get(device_id)
        if device is None or device.home_id != body.home_id:
            raise unprocessable(loc, "unknown_device", f"{device_id} is not a device of home {body.home_id}")
    for i, action in enumerate(body.actions):
        if action.command is not None:
            device = book.devices[action.command.device_id]
            try:
                action.command.params = validate_command(
                    device.device_type, action.command.name, action.command.params
                )
            except CommandInvalid as exc:
                raise unprocessable(("body", "actions", i, "command"), exc.reason, exc.message) from exc


@router.post(
    "/automations",
    status_code=status.HTTP_201_CREATED,
    summary="Create an automation: a trigger, conditions, actions (commands, notifications), a mode",
    responses=error_responses(400, 401, 403, 413),
)
async def create_automation(
    body: AutomationBody, principal: CurrentPrincipal, writer: Writer, book: Book
) -> dict[str, Any]:
    if not principal.may_see(body.home_id):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"this token may not add automations to {body.home_id}"
        )
    _check_devices(body, book)
    now = utcnow()
    automation_id = new_id()
    raw = body.model_dump(exclude_none=True, mode="json")
    try:
        automation = msgspec.convert(
            {**raw, "automation_id": str(automation_id), "created_at": now.isoformat()}, Automation
        )
        check_rule(automation.trigger, automation.conditions, automation.actions)
    except RuleInvalid as exc:
        raise unprocessable(("body", *exc.where), exc.reason, exc.message) from exc
    except msgspec.ValidationError as exc:
        raise unprocessable(("body",), "invalid_automation", str(exc)) from exc
    fact = AutomationCreated(
        fact_id=automation_id, home_id=body.home_id, occurred_at=now, recorded_at=now, payload=automation
    )
    await writer.append_home(fact)
    return {"automation_id": str(automation_id), **msgspec.to_builtins(automation)}


class SwitchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    home_id: str = Field(pattern=IDENTIFIER_PATTERN)
    enabled: bool


@router.put(
    "/automations/{automation_id}/enabled",
    summary="Switch an automation on (also after the loop breaker suspended it) or off",
    responses=error_responses(400, 401, 403, 413),
)
async def switch_automation(
    automation_id: Annotated[uuid.UUID, Path()],
    body: SwitchBody,
    principal: CurrentPrincipal,
    writer: Writer,
) -> dict[str, Any]:
    if not principal.may_see(body.home_id):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"this token may not change automations of {body.home_id}"
        )
    now = utcnow()
    fact = AutomationSwitched(
        fact_id=new_id(), home_id=body.home_id, occurred_at=now, recorded_at=now,
        payload=SwitchPayload(automation_id=automation_id, enabled=body.enabled),
    )  # fmt: skip
    await writer.append_home(fact)
    return {"automation_id": str(automation_id), "enabled": body.enabled}


@router.put(
    "/homes/{home_id}/notifications",
    summary="Where a home's notifications go: a webhook, signed with the secret (X-Hearth-Signature)",
    responses=error_responses(400, 401, 403, 413),
)
async def put_notifications(
    home_id: HomeId, body: NotificationsBody, principal: CurrentPrincipal, writer: Writer
) -> dict[str, str]:
    require_home(principal, home_id)
    now = utcnow()
    fact = HomeNotificationsSet(
        fact_id=new_id(), home_id=home_id, occurred_at=now, recorded_at=now,
        payload=NotificationsPayload(webhook_url=str(body.webhook_url), secret=body.secret),
    )  # fmt: skip
    await writer.append_home(fact)
    return {"home_id": home_id, "webhook_url": str(body.webhook_url)}
