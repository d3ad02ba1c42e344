"""Firmware campaigns over HTTP (admin tokens only; ../shared/CONTRACT.md, "Lights, administration,
firmware"): ``POST /v1/campaigns``, ``GET /v1/campaigns/{id}``, ``POST /v1/campaigns/{id}/abort``; and
``POST /v1/firmware`` (register a firmware by version, url, sha256 and size: what a rollback returns a
device to), ``GET /v1/campaigns`` (every campaign, without per-device detail).

The routes check what they can (the type, the firmware, the waves, the target against the devices this
API knows) and answer 422 saying what is wrong, writing nothing; then they put a request on the
campaign-requests topic for the campaign driver (hearth_campaigns), the one writer of campaign facts.
``GET`` reads the campaigns topic as folded by ``CampaignFeed``; right after a ``POST`` it waits (up to
``wait_s``) for the driver to have recorded the start.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hearth_command_api.entrypoints.deps import Book, CurrentPrincipal, Writer
from hearth_command_api.entrypoints.schemas import printable
from hearth_shared.adapters.campaign_feed import CampaignFeed, campaign_view
from hearth_shared.domain import CommandInvalid, device_type_names
from hearth_shared.domain.admin import validate_firmware
from hearth_shared.domain.campaign_gates import wave_sizes
from hearth_shared.schema.campaign_events import (
    AbortCampaign,
    AbortThresholds,
    Firmware,
    RegisterFirmware,
    StartCampaign,
)
from hearth_shared.schema.events import new_id, utcnow
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.web.http import require_admin
from hearth_shared.web.http_errors import error_responses, unprocessable

router = APIRouter(prefix="/v1", tags=["campaigns"])

DeviceIdItem = Annotated[str, Field(pattern=IDENTIFIER_PATTERN)]


class FirmwareBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device_type: str
    version: str = Field(examples=["2.4.1"])
    url: str = Field(examples=["https://firmware.example/lock-2.4.1.bin"])
    sha256: str = Field(description="The image's SHA-256, 64 hexadecimal digits")
    size: int | None = Field(None, ge=1, le=2**40, description="The image's size in bytes")

    def firmware(self) -> Firmware:
        if self.device_type not in device_type_names():
            raise unprocessable(
                ("body", "device_type"), "unknown_device_type", f"no type {self.device_type!r}"
            )
        try:
            checked = validate_firmware(self.version, self.url, self.sha256)
        except CommandInvalid as bad:
            raise unprocessable(("body",), bad.reason, bad.message) from bad
        return Firmware(device_type=self.device_type, size=self.size, **checked)


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid")

    home_ids: list[Annotated[str, Field(pattern=IDENTIFIER_PATTERN)]] | None = Field(None, max_length=10_000)
    device_ids: list[DeviceIdItem] | None = Field(None, max_length=100_000)

    @model_validator(mode="after")
    def one_of(self) -> Target:
        if bool(self.home_ids) == bool(self.device_ids):
            raise ValueError("give exactly one of home_ids or device_ids, not empty")
        return self


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_failed_pct: float = Field(ge=0, le=100, allow_inf_nan=False)
    max_offline_pct: float = Field(ge=0, le=100, allow_inf_nan=False)
    max_anomaly_ratio: float = Field(gt=0, allow_inf_nan=False)


class CampaignBody(FirmwareBody):
    target: Target
    waves: list[Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)]] = Field(
        min_length=1,
        max_length=100,
        examples=[[1, 10, 100]],
        description="Cumulative percents, ending at 100",
    )
    soak_s: float = Field(ge=0, le=7 * 86400, allow_inf_nan=False, description="Wait after each wave")
    abort: Thresholds
    job_timeout_s: float = Field(
        300, gt=0, le=86400, allow_inf_nan=False, description="A device's install may take this long"
    )


class AbortBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field("requested", min_length=1, max_length=500)

    def text(self) -> str:
        return printable(self.reason)


class CampaignCreated(BaseModel):
    campaign_id: uuid.UUID


def _feed(request: Request) -> CampaignFeed:
    feed: CampaignFeed = request.app.state.campaign_feed
    return feed


def _checked_target(body: CampaignBody, book: Book) -> None:
    kind, target = body.device_type, body.target
    if target.device_ids:
        for device_id in target.device_ids:
            device = book.devices.get(device_id)
            if device is None or device.device_type != kind:
                what = "no such device" if device is None else f"a {device.device_type}, not a {kind}"
                raise unprocessable(("body", "target", "device_ids"), "bad_target", f"{device_id}: {what}")
    else:
        homes = set(target.home_ids or ())
        if not any(d.home_id in homes and d.device_type == kind for d in book.devices.values()):
            raise unprocessable(("body", "target", "home_ids"), "empty_target", f"no {kind} in those homes")
    try:
        wave_sizes(1, body.waves)
    except ValueError as bad:
        raise unprocessable(("body", "waves"), "invalid_waves", str(bad)) from bad


@router.post(
    "/firmware",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Register a firmware image (admin): campaigns install it, rollbacks return devices to it",
    responses=error_responses(400, 401, 403, 409, 413),
)
async def register_firmware(
    body: FirmwareBody, principal: CurrentPrincipal, writer: Writer, request: Request
) -> dict[str, Any]:
    require_admin(principal, "register firmware")
    firmware = body.firmware()
    known = _feed(request).catalog.get((firmware.device_type, firmware.version))
    if known is not None and (known.url, known.sha256) != (firmware.url, firmware.sha256):
        raise HTTPException(status.HTTP_409_CONFLICT, f"{firmware.version} is registered with another image")
    await writer.request_campaign(
        firmware.version, RegisterFirmware(request_id=new_id(), sent_at=utcnow(), firmware=firmware)
    )
    return {"device_type": firmware.device_type, "version": firmware.version, "status": "pending"}


@router.post(
    "/campaigns",
    status_code=status.HTTP_201_CREATED,
    summary="Start a firmware campaign (admin) in waves, with health gates that abort and roll back",
    responses=error_responses(400, 401, 403, 413),
)
async def start_campaign(
    body: CampaignBody, principal: CurrentPrincipal, writer: Writer, book: Book
) -> CampaignCreated:
    require_admin(principal, "start firmware campaigns")
    firmware = body.firmware()
    _checked_target(body, book)
    campaign_id = uuid.uuid4()
    start = StartCampaign(
        request_id=new_id(),
        sent_at=utcnow(),
        campaign_id=campaign_id,
        firmware=firmware,
        home_ids=tuple(body.target.home_ids or ()),
        device_ids=tuple(body.target.device_ids or ()),
        waves=tuple(body.waves),
        soak_s=body.soak_s,
        abort=AbortThresholds(**body.abort.model_dump()),
        job_timeout_s=body.job_timeout_s,
    )
    await writer.request_campaign(str(campaign_id), start)
    return CampaignCreated(campaign_id=campaign_id)


@router.get("/campaigns", summary="Every campaign, newest first (admin)", responses=error_responses(401, 403))
async def list_campaigns(principal: CurrentPrincipal, request: Request) -> list[dict[str, Any]]:
    require_admin(principal, "see campaigns")
    campaigns = sorted(_feed(request).campaigns.values(), key=lambda c: c.started_at, reverse=True)
    return [campaign_view(c, devices=False) for c in campaigns]


@router.get(
    "/campaigns/{campaign_id}",
    summary="A campaign: status, per wave, per device (admin)",
    responses=error_responses(401, 403, 404),
)
async def get_campaign(
    campaign_id: Annotated[uuid.UUID, Path()],
    principal: CurrentPrincipal,
    request: Request,
    wait_s: Annotated[
        float, Query(ge=0, le=30, description="Wait this long for a campaign just started")
    ] = 5.0,
) -> dict[str, Any]:
    require_admin(principal, "see campaigns")
    campaign = await _feed(request).wait_for(str(campaign_id), wait_s)
    if campaign is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"campaign {campaign_id} not found")
    return campaign_view(campaign)


@router.post(
    "/campaigns/{campaign_id}/abort",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Abort a campaign (admin): no further waves; the current wave's devices are rolled back",
    responses=error_responses(400, 401, 403, 404, 413),
)
async def abort_campaign(
    campaign_id: Annotated[uuid.UUID, Path()],
    principal: CurrentPrincipal,
    writer: Writer,
    request: Request,
    body: AbortBody | None = None,
) -> dict[str, Any]:
    require_admin(principal, "abort campaigns")
    if await _feed(request).wait_for(str(campaign_id), 0) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"campaign {campaign_id} not found")
    reason = (body or AbortBody()).text()
    await writer.request_campaign(
        str(campaign_id),
        AbortCampaign(request_id=new_id(), sent_at=utcnow(), campaign_id=campaign_id, reason=reason),
    )
    return {"campaign_id": str(campaign_id), "status": "aborting"}
