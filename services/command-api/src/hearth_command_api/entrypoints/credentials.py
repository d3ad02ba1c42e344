"""Device MQTT credentials (../shared/CONTRACT.md, "Devices connect over MQTT").

* ``POST /v1/devices`` issues the first credential (``issue_credential``, called by the registration
  route) and answers it once in ``credentials``; none for a ``"simulated": true`` device, which the
  simulator hub plays.
* ``POST /v1/devices/{id}/credentials`` issues a new secret (the old one stops working),
  ``DELETE /v1/devices/{id}/credentials`` revokes it. Token of the device's home, or admin.
* ``POST /v1/devices/{id}/shard`` {shard} (admin; ``hearth device move-shard``) moves the device to
  another MQTT broker shard (``hearth_shared.schema.shards``): ``device.shard_moved``, then new
  credentials naming the new broker, answered once as a rotation's are (a simulated device gets none).

``mqtt_url`` is the device's shard's device URL (``CommandApiSettings.shard_urls``). An answer with new
credentials returns once the device's broker has loaded them (``device.credentials_loaded``, which the
shard's broker-access follower asks for after the reload it confirmed), so a device connecting right
after the answer is let in; if that takes longer than ``HEARTH_COMMAND_API_CREDENTIALS_WAIT_S`` (10 s:
the follower is down), the answer comes anyway and the credentials work once the follower is back.

The secret is made here and exists in plaintext only in the HTTP answer: what goes to the inbox (and so
to the journal, and to the broker's password file) is its salted hash (``hearth_shared.schema.credentials``).
The broker stops accepting the old secret, and drops a device connected with it, once the broker-access
follower (``hearth_device_gateway.broker_access``) has applied the fact: well within the contract's 5 s.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, HTTPException, Response, status
from pydantic import BaseModel, Field

from hearth_command_api.entrypoints.deps import Book, CurrentPrincipal, Settings, Writer
from hearth_command_api.entrypoints.schemas import DeviceId
from hearth_command_api.service.device_book import DeviceBook, DeviceEntry
from hearth_command_api.service.ports import TopicWriter
from hearth_command_api.settings import CommandApiSettings
from hearth_shared.schema.auth import Principal
from hearth_shared.schema.credentials import hash_secret, new_credential_id, new_secret
from hearth_shared.schema.events import (
    IssueCredentials,
    MoveDeviceShard,
    RevokeCredentials,
    new_id,
    utcnow,
)
from hearth_shared.web.http import not_found, require_admin
from hearth_shared.web.http_errors import error_responses, unprocessable

router = APIRouter(prefix="/v1", tags=["credentials"])


class DeviceCredentials(BaseModel):
    """A device's MQTT credential; ``password`` is shown this once and never stored."""

    username: str = Field(description="The device id: the MQTT username")
    password: str = Field(description="The device's secret: the MQTT password (shown only here)")
    mqtt_url: str = Field(description="Where the device connects")
    credential_id: uuid.UUID = Field(description="Names this credential in the journal's facts")


async def issue_credential(
    writer: TopicWriter,
    book: DeviceBook,
    settings: CommandApiSettings,
    device_id: str,
    credential_id: uuid.UUID | None = None,
) -> DeviceCredentials:
    """Make a secret, put its hash on the inbox for the device, wait (at most ``credentials_wait_s``)
    until the device's broker has loaded it, and return the plaintext (once) with that broker's URL."""
    device = book.devices[device_id]
    mqtt_url = settings.shard_urls().get(device.shard)
    if mqtt_url is None:  # a shard the settings no longer list: the device cannot connect anywhere
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"device {device_id} is on MQTT shard {device.shard!r}, which is not configured; move it "
            "(hearth device move-shard) to one that is",
        )
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
    await book.wait_credentials_loaded(device_id, credential_id, settings.credentials_wait_s)
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
    return await issue_credential(writer, book, settings, device_id)


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


class ShardBody(BaseModel):
    model_config = {"extra": "forbid"}

    shard: str = Field(max_length=64, description="The MQTT broker shard to move it to (a configured name)")


class ShardMoved(BaseModel):
    device_id: str
    shard: str = Field(description="The shard the device is on now")
    mqtt_url: str = Field(description="Where the device connects from now on")
    credentials: DeviceCredentials | None = Field(
        None, description="Its new credentials (shown only here); none for a simulated device"
    )


@router.post(
    "/devices/{device_id}/shard",
    response_model=ShardMoved,
    response_model_exclude_none=True,
    summary="Move a device to another MQTT broker shard (admin): new credentials naming its new broker",
    responses=error_responses(400, 401, 403, 404, 409, 413),
)
async def move_shard(
    device_id: DeviceId,
    body: ShardBody,
    principal: CurrentPrincipal,
    writer: Writer,
    book: Book,
    settings: Settings,
) -> ShardMoved:
    require_admin(principal, "move devices between MQTT shards")
    device = book.devices.get(device_id)
    if device is None:
        raise not_found(f"device {device_id}")
    urls = settings.shard_urls()
    if body.shard not in urls:
        raise unprocessable(
            ("body", "shard"), "unknown_shard", f"no MQTT shard {body.shard!r}; configured: {', '.join(urls)}"
        )
    if body.shard == device.shard:
        raise HTTPException(
            status.HTTP_409_CONFLICT, f"device {device_id} is on MQTT shard {body.shard} already"
        )
    move = MoveDeviceShard(request_id=new_id(), device_id=device_id, sent_at=utcnow(), shard=body.shard)
    await writer.send_request(move)
    device.shard = body.shard  # its fact follows; the credentials below name the new broker
    credentials = None if device.simulated else await issue_credential(writer, book, settings, device_id)
    return ShardMoved(
        device_id=device_id, shard=body.shard, mqtt_url=urls[body.shard], credentials=credentials
    )


__all__ = ["DeviceCredentials", "issue_credential", "router"]
