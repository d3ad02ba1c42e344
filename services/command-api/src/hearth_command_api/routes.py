"""The command API's endpoints (see ../shared/CONTRACT.md, HTTP)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Response, status

from hearth_command_api.credentials import issue_credential
from hearth_command_api.deps import CurrentPrincipal, Journal, Registry, Settings
from hearth_command_api.registry import fingerprint
from hearth_command_api.schemas import CommandAccepted, RegisterDeviceBody, SubmitCommandBody, WaitFor
from hearth_shared.domain import CommandInvalid, decide, evolve, stamp, twin_view, validate_command
from hearth_shared.events import RegisterDevice, SubmitCommand, new_id, utcnow
from hearth_shared.http import not_found

router = APIRouter(prefix="/v1")

# Idempotency keys name commands: the same key for the same device always gives the same command id,
# so even two API processes racing on one retry put one command into the journal (the actor drops the
# second request for a command id it already has).
IDEMPOTENCY_NAMESPACE = uuid.UUID("3f7d9a52-52f4-4a8e-8c1e-6f1f6f0b1e11")


@router.post("/devices", status_code=status.HTTP_201_CREATED, summary="Register a device")
async def register_device(
    body: RegisterDeviceBody,
    principal: CurrentPrincipal,
    journal: Journal,
    registry: Registry,
    settings: Settings,
) -> dict[str, Any]:
    if not principal.may_see(body.home_id):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"this token may not register devices in {body.home_id}"
        )
    device_id = body.device_id or f"{body.type}-{uuid.uuid4().hex[:12]}"
    if device_id in registry.devices:
        raise HTTPException(status.HTTP_409_CONFLICT, f"device {device_id} is already registered")
    now = utcnow()
    request = RegisterDevice(
        request_id=new_id(),
        device_id=device_id,
        sent_at=now,
        home_id=body.home_id,
        device_type=body.type,
        name=body.name,
        simulated=body.simulated,
    )
    await journal.submit(request)
    registry.remember_device(device_id, body.home_id, body.type, body.simulated)
    # Its MQTT credential, answered this once (a simulated device has none: the simulator hub plays it).
    credentials = None if body.simulated else await issue_credential(journal, device_id, settings.mqtt_url)
    # The twin the device actor will create: the same pure functions, applied here to show it.
    twin = None
    for event in stamp(
        None,
        decide(None, request, now),
        home_id=body.home_id,
        device_id=device_id,
        now=now,
        causation_id=request.request_id,
    ):
        twin = evolve(twin, event)
    assert twin is not None
    view = twin_view(twin)
    if credentials is not None:
        view["credentials"] = credentials.model_dump(mode="json")
    return view


@router.post(
    "/devices/{device_id}/commands",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=CommandAccepted,
    response_model_exclude_none=True,
    summary="Send a command to a device",
)
async def submit_command(
    device_id: str,
    body: SubmitCommandBody,
    principal: CurrentPrincipal,
    journal: Journal,
    registry: Registry,
    settings: Settings,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    wait: Annotated[WaitFor | None, Query(description="Block until this status or a terminal one")] = None,
    timeout_s: Annotated[float, Query(gt=0, description="How long ?wait= may block")] = 10.0,
) -> CommandAccepted:
    device = registry.devices.get(device_id)
    if device is None or not principal.may_see(device.home_id):
        raise not_found(f"device {device_id}")
    try:
        params = validate_command(device.device_type, body.name, body.params)
    except CommandInvalid as exc:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [{"loc": ["body", "params"], "type": exc.reason, "msg": exc.message}],
        ) from exc
    expires_in = body.expires_in_s or settings.default_expires_in_s
    if expires_in > settings.max_expires_in_s:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [
                {
                    "loc": ["body", "expires_in_s"],
                    "type": "out_of_range",
                    "msg": f"expires_in_s may be at most {settings.max_expires_in_s:g}",
                }
            ],
        )
    print_ = fingerprint(body.name, params)
    if idempotency_key:
        command_id = uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{device_id}\n{idempotency_key}")
        known = registry.commands.get(command_id)
        if known is not None and known.fingerprint != print_:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                [
                    {
                        "loc": ["header", "Idempotency-Key"],
                        "type": "idempotency_key_reused",
                        "msg": "this Idempotency-Key was already used with a different body",
                    }
                ],
            )
    else:
        command_id, known = uuid.uuid4(), None
    if known is None:
        now = utcnow()
        await journal.submit(
            SubmitCommand(
                request_id=new_id(),
                device_id=device_id,
                sent_at=now,
                home_id=device.home_id,
                command_id=command_id,
                name=body.name,
                params=params,
                expires_at=now + timedelta(seconds=expires_in),
            )
        )
        entry = registry.remember_command(command_id, device_id, print_)
    else:
        entry = known
    result = CommandAccepted(
        command_id=command_id, device_id=device_id, status=entry.status, name=body.name, params=params
    )
    if wait is not None:
        result.status, result.timed_out = await registry.wait_for(
            command_id, wait, min(timeout_s, settings.max_wait_s)
        )
        response.status_code = status.HTTP_200_OK
    return result
