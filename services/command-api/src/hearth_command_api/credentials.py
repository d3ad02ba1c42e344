"""Device MQTT credentials (../shared/CONTRACT.md, "Devices connect over MQTT").

* ``POST /v1/devices`` issues the first credential (``issue_credential``, called by the registration
  route) and answers it once in ``credentials``; none for a ``"simulated": true`` device, which the
  simulator hub plays.
* ``POST /v1/devices/{id}/credentials`` issues a new secret (the old one stops working),
  ``DELETE /v1/devices/{id}/credentials`` revokes it. Token of the device's home, or admin.

The secret is made here and exists in plaintext only in the HTTP answer: what goes to the inbox (and so
to the journal, and to the broker's password file) is its salted hash (``hearth_shared.schema.credentials``).
The broker stops accepting the old secret, and drops a device connected with it, once the broker-access
follower (``hearth_device_gateway.broker_access``) has applied the fact: well within the contract's 5 s.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, HTTPException, Response, status
from pydantic import BaseModel, Field

from hearth_command_api.deps import Book, CurrentPrincipal, Settings, Writer
from hearth_command_api.device_book import DeviceEntry
from hearth_command_api.ports import TopicWriter
from hearth_command_api.schemas import DeviceId
from hearth_shared.schema.auth import Principal
from hearth_shared.schema.credentials import hash_secret, new_credential_id, new_secret
from hearth_shared.schema.events import IssueCredentials, RevokeCredentials, new_id, utcnow
from hearth_shared.web.http import not_found
from hearth_shared.web.http_errors import error_responses

router = APIRouter(prefix="/v1", tags=["credentials"])


class DeviceCredentials(BaseModel):
    """A device's MQTT credential; ``password`` is shown this once and never stored."""

    username: str = Field(description="The device id: the MQTT username")
    password: str = Field(description="The device's secret: the MQTT password (shown only here)")
    mqtt_url: str = Field(description="Where the device connects")
    credential_id: uuid.UUID = Field(description="Names this credential in the journal's facts")


async def issue_credential(
    writer: TopicWriter, device_id: str, mqtt_url: str, credential_id: uuid.UUID | None = None
) -> DeviceCredentials:
    """Make a secret, put its hash on the inbox for the device, and return the plaintext (once)."""
    secret, credential_id = new_secret(), credential_id or new_credential_id()
    await writer.send_request(
        IssueCredentials(
            request_id=new_id(),
            device_id=device_id,
            sent_at=utcnow(),
            credential_id=credential_id,
            password_hash=hash_secret(secret),
        )
    )
    return DeviceCredentials(
        username=device_id, password=secret, mqtt_url=mqtt_url, credential_id=credential_id
    )


def _device(book: Book, principal: Principal, device_id: str) -> DeviceEntry:
    device = book.devices.get(device_id)
    if device is None or not principal.may_see(device.home_id):
        raise not_found(f"device {device_id}")
    if device.simulated:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"device {device_id} is simulated: the simulator hub connects for it, it has no credentials",
        )
    return device


@router.post(
    "/devices/{device_id}/credentials",
    status_code=status.HTTP_201_CREATED,
    response_model=DeviceCredentials,
    summary="Issue a new MQTT secret for a device (the old one stops working and its connection drops)",
    responses=error_responses(400, 401, 404, 409, 413),
)
async def rotate_credentials(
    device_id: DeviceId, principal: CurrentPrincipal, writer: Writer, book: Book, settings: Settings
) -> DeviceCredentials:
    _device(book, principal, device_id)
    return await issue_credential(writer, device_id, settings.mqtt_url)


@router.delete(
    "/devices/{device_id}/credentials",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Revoke a device's MQTT credential (it can no longer connect; a connection drops within 5 s)",
    responses=error_responses(400, 401, 404, 409, 413),
)
async def revoke_credentials(
    device_id: DeviceId, principal: CurrentPrincipal, writer: Writer, book: Book
) -> Response:
    _device(book, principal, device_id)
    await writer.send_request(RevokeCredentials(request_id=new_id(), device_id=device_id, sent_at=utcnow()))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


__all__ = ["DeviceCredentials", "issue_credential", "router"]
