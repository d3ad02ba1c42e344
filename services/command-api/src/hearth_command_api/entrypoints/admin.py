"""Device administration over HTTP (../shared/CONTRACT.md, "Lights, administration, firmware").

* Admin commands (``reboot``, ``update_firmware``) travel the ordinary command route; ``admin_params``
  is its check: a home token gets 403 with a message that says why, before anything is written.
* ``POST /v1/devices/{id}/quarantine`` {reason} and ``DELETE`` (release): admin tokens only, checked
  before the device is looked up (a home token learns nothing about which ids exist). The request goes to
  the inbox; the device actor records ``device.quarantined`` / ``device.released`` (hearth_shared.domain.
  admin), so a quarantine is a journal fact like any other and replays with it. The answer is 202: the
  twin shows ``quarantine`` once the actor has decided (read your write with the query API's
  ``?min_version=``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Response, status
from pydantic import BaseModel, Field, field_validator

from hearth_command_api.entrypoints.deps import Book, CurrentPrincipal, Writer
from hearth_command_api.entrypoints.schemas import DeviceId, printable
from hearth_shared.domain.admin import MAX_REASON_LENGTH, validate_admin
from hearth_shared.schema.auth import Principal
from hearth_shared.schema.events import QuarantineDevice, ReleaseDevice, new_id, utcnow
from hearth_shared.web.http import not_found, require_admin
from hearth_shared.web.http_errors import error_responses

router = APIRouter(prefix="/v1", tags=["administration"])


def admin_params(principal: Principal, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Normalized params of an admin command sent with ``principal``'s token (403 for a home token)."""
    require_admin(principal, f"send {name}")
    return validate_admin(name, params)


class QuarantineBody(BaseModel):
    model_config = {"extra": "forbid"}

    reason: str = Field(
        min_length=1, max_length=MAX_REASON_LENGTH, description="Why; shown on the twin (one line of text)"
    )

    @field_validator("reason")
    @classmethod
    def one_line_of_text(cls, value: str) -> str:
        return printable(value)


class QuarantineRequested(BaseModel):
    device_id: str
    reason: str
    requested_at: datetime
    status: str = Field("pending", description="The device actor records device.quarantined next")


def _known(book: Book, device_id: str) -> None:
    if device_id not in book.devices:
        raise not_found(f"device {device_id}")


@router.post(
    "/devices/{device_id}/quarantine",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Quarantine a device (admin): it rejects every non-admin command with reason `quarantined`",
    responses=error_responses(400, 401, 403, 404, 413),
)
async def quarantine_device(
    device_id: DeviceId,
    body: QuarantineBody,
    principal: CurrentPrincipal,
    writer: Writer,
    book: Book,
) -> QuarantineRequested:
    require_admin(principal, "quarantine devices")
    _known(book, device_id)
    now = utcnow()
    request = QuarantineDevice(request_id=new_id(), device_id=device_id, sent_at=now, reason=body.reason)
    await writer.send_request(request)
    return QuarantineRequested(device_id=device_id, reason=body.reason, requested_at=now)


@router.delete(
    "/devices/{device_id}/quarantine",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Release a device from quarantine (admin); nothing happens if it is not quarantined",
    responses=error_responses(400, 401, 403, 404, 413),
)
async def release_device(
    device_id: DeviceId, principal: CurrentPrincipal, writer: Writer, book: Book
) -> Response:
    require_admin(principal, "release devices from quarantine")
    _known(book, device_id)
    await writer.send_request(ReleaseDevice(request_id=new_id(), device_id=device_id, sent_at=utcnow()))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


__all__ = ["admin_params", "router"]
