"""The command API's endpoints (see ../shared/CONTRACT.md, HTTP)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Response, status

from hearth_command_api.entrypoints.admin import admin_params
from hearth_command_api.entrypoints.credentials import issue_credential
from hearth_command_api.entrypoints.deps import Book, CurrentPrincipal, Settings, Writer
from hearth_command_api.entrypoints.schemas import (
    CommandAccepted,
    DeviceId,
    RegisterDeviceBody,
    SubmitCommandBody,
    WaitFor,
)
from hearth_command_api.service.device_book import DeviceBook, fingerprint
from hearth_shared.domain import CommandInvalid, decide, evolve, stamp, twin_view, validate_command
from hearth_shared.domain.admin import is_admin_command
from hearth_shared.schema.auth import Principal
from hearth_shared.schema.events import RegisterDevice, SubmitCommand, new_id, utcnow
from hearth_shared.schema.shards import assign_shard
from hearth_shared.web.http import not_found
from hearth_shared.web.http_errors import error_responses, unprocessable

router = APIRouter(prefix="/v1")

IDEMPOTENCY_KEY_DESCRIPTION = (
    "Names the command for retries. Within the command window (`HEARTH_COMMAND_API_COMMAND_WINDOW_S`, "
    "24 hours by default) after the command finished, and for as long as it has not, the same key for "
    "the same device answers the same `command_id` and its status (with `?wait=`, waits on it) and "
    "writes nothing; the same key with another body is a 422 (`idempotency_key_reused`). Once the "
    "window has passed, the key names a new command: a retry then answers 202 with a new `command_id` "
    "and `pending`, and that command runs (another body is no longer a 422)."
)


def chosen_device_id(principal: Principal, body: RegisterDeviceBody, book: DeviceBook) -> str:
    """The new device's id. Only an admin token (provisioning, the simulator) may choose one, and gets
    409 for a taken one; a home token may not (422), the server names it ``{type}-{random}``: so a home
    token's answer never depends on which ids other homes' devices have (a 409 told a stranger)."""
    if body.device_id is not None:
        if not principal.admin:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                [
                    {
                        "loc": ["body", "device_id"],
                        "type": "not_allowed",
                        "msg": "omit device_id: with a home token the server assigns it ({type}-{random});"
                        " only an admin token may choose device ids",
                    }
                ],
            )
        if body.device_id in book.devices:
            raise HTTPException(status.HTTP_409_CONFLICT, f"device {body.device_id} is already registered")
        return body.device_id
    while True:  # 48 random bits: a repeat is all but impossible, and then it is drawn again
        device_id = f"{body.type}-{uuid.uuid4().hex[:12]}"
        if device_id not in book.devices:
            return device_id


@router.post(
    "/devices",
    status_code=status.HTTP_201_CREATED,
    summary="Register a device",
    description="With a home token, omit `device_id` (the server assigns it); an admin token may choose "
    "it, and a taken one is a 409.",
    responses={
        status.HTTP_201_CREATED: {
            "description": "The twin the device starts with",
            "links": {  # (what schemathesis follows in its stateful run)
                "SubmitCommand": {
                    "operationId": "submit_command_v1_devices__device_id__commands_post",
                    "parameters": {"device_id": "$response.body#/device_id"},
                }
            },
        },
        **error_responses(400, 401, 403, 409, 413),
    },
)
async def register_device(
    body: RegisterDeviceBody,
    principal: CurrentPrincipal,
    writer: Writer,
    book: Book,
    settings: Settings,
) -> dict[str, Any]:
    if not principal.may_see(body.home_id):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"this token may not register devices in {body.home_id}"
        )
    device_id = chosen_device_id(principal, body, book)
    now = utcnow()
    request = RegisterDevice(
        request_id=new_id(),
        device_id=device_id,
        sent_at=now,
        home_id=body.home_id,
        device_type=body.type,
        name=body.name,
        simulated=body.simulated,
        shard=assign_shard(device_id, list(settings.shard_urls())),  # once: a fact from now on
    )
    await writer.send_request(request)
    book.remember_device(device_id, body.home_id, body.type, body.simulated, request.shard)
    # Its MQTT credential, answered this once (a simulated device has none: the simulator hub plays it),
    # once its broker has loaded it (credentials.py).
    credentials = None if body.simulated else await issue_credential(writer, book, settings, device_id)
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
    description="The device type's commands, and for admin tokens `reboot` {} and `update_firmware` "
    "{version, url, sha256} on any device (a home token gets 403). A quarantined device rejects every "
    "non-admin command (status `rejected`, reason `quarantined`). With an `Idempotency-Key`, a retry "
    "answers the same command until the command window has passed since it finished; after that the "
    "key names a new command (see the header).",
    responses={
        status.HTTP_200_OK: {
            "model": CommandAccepted,
            "description": "With ?wait=: the status reached, and whether the timeout passed first",
        },
        **error_responses(400, 401, 403, 404, 413),
    },
)
async def submit_command(
    device_id: DeviceId,
    body: SubmitCommandBody,
    principal: CurrentPrincipal,
    writer: Writer,
    book: Book,
    settings: Settings,
    idempotency_key: Annotated[
        str | None, Header(max_length=200, description=IDEMPOTENCY_KEY_DESCRIPTION)
    ] = None,
    wait: Annotated[WaitFor | None, Query(description="Block until this status or a terminal one")] = None,
    timeout_s: Annotated[
        float, Query(gt=0, allow_inf_nan=False, description="How long ?wait= may block")
    ] = 10.0,
) -> Response:
    """A command request on the inbox, or the command an ``Idempotency-Key`` already names.

    The key's command id is derived from the device, the key and the window's generation
    (``DeviceBook.keyed_command``): a retry within the window after the command finished gets the
    same command (a different body: 422); after the window, a new id, so a new command that runs (the
    device actor drops a request whose command id it has seen, and would drop a reused one)."""
    device = book.devices.get(device_id)
    if device is None or not principal.may_see(device.home_id):
        raise not_found(f"device {device_id}")
    try:
        if is_admin_command(body.name):
            params = admin_params(principal, body.name, body.params)
        else:
            params = validate_command(device.device_type, body.name, body.params)
    except CommandInvalid as exc:
        raise unprocessable(("body", "params"), exc.reason, exc.message) from exc
    expires_in = body.expires_in_s or settings.default_expires_in_s
    if expires_in > settings.max_expires_in_s:
        raise unprocessable(
            ("body", "expires_in_s"),
            "out_of_range",
            f"expires_in_s may be at most {settings.max_expires_in_s:g}",
        )
    print_ = fingerprint(body.name, params)
    now = book.clock()
    if idempotency_key:
        command_id, known = book.keyed_command(device_id, idempotency_key, now)
        if known is not None and known.fingerprint != print_:
            raise unprocessable(
                ("header", "Idempotency-Key"),
                "idempotency_key_reused",
                "this Idempotency-Key was already used with a different body",
            )
    else:
        command_id, known = uuid.uuid4(), None
    if known is None:
        expires_at = now + timedelta(seconds=expires_in)
        await writer.send_request(
            SubmitCommand(
                request_id=new_id(),
                device_id=device_id,
                sent_at=now,
                home_id=device.home_id,
                command_id=command_id,
                name=body.name,
                params=params,
                expires_at=expires_at,
            )
        )
        entry = book.remember_command(command_id, device_id, print_, expires_at)
    else:
        entry = known
    result = CommandAccepted(
        command_id=command_id,
        device_id=device_id,
        status=entry.status,
        twin_version=entry.twin_version,
        name=body.name,
        params=params,
    )
    code = status.HTTP_202_ACCEPTED
    if wait is not None:
        result.status, result.timed_out = await book.wait_for(
            command_id, wait, min(timeout_s, settings.max_wait_s)
        )
        result.twin_version = entry.twin_version  # set with the status, in the same step (device_book)
        code = status.HTTP_200_OK
    # Encoded here, once, by pydantic-core: the model was built from checked values just above, and
    # FastAPI's response_model path would validate it again and encode it through json.dumps (on the
    # hot path of every command). ``response_model`` above still documents it.
    return Response(result.model_dump_json(exclude_none=True), code, media_type="application/json")
