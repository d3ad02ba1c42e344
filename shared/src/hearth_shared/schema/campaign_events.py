"""Firmware campaign records: the requests the command API sends the campaign driver, and the facts the
driver records about each campaign (../shared/CONTRACT.md, "Lights, administration, firmware").

* **Requests** (``CampaignRequest``, topic ``campaign-requests``): ``register_firmware``,
  ``start_campaign``, ``abort_campaign``. ``request_id``/``campaign_id`` make a retry harmless.
* **Facts** (``CampaignFact``, topic ``campaigns``, keyed by ``campaign_id``, numbered ``version`` 1, 2,
  ... per campaign): the driver (hearth_campaigns) is their one writer, so a campaign's story is totally
  ordered and folding it (hearth_shared.domain.campaign.evolve_campaign) rebuilds the campaign exactly.
  Firmware registrations are facts too, under the id ``firmware:{device_type}:{version}``.

A campaign's facts are a separate stream from the device journal (its own envelope: ``campaign_id``, not
``device_id``/``home_id``) because a campaign is not a device and has its own single writer; the device
side of a campaign (each ``update_firmware`` command) is ordinary device facts in the journal.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal, TypeAlias, Union

import msgspec

from hearth_shared.schema.events import MalformedRecord

JobState = Literal["queued", "sent", "in_progress", "succeeded", "failed", "timed_out", "rolled_back"]
JOB_STATES: tuple[JobState, ...] = (
    "queued", "sent", "in_progress", "succeeded", "failed", "timed_out", "rolled_back",
)  # fmt: skip
JOB_ENDED: frozenset[str] = frozenset({"succeeded", "failed", "timed_out", "rolled_back"})
CampaignStatus = Literal["running", "completed", "aborted"]


class Firmware(msgspec.Struct, frozen=True, kw_only=True):
    device_type: str
    version: str
    url: str
    sha256: str
    size: int | None = None


class AbortThresholds(msgspec.Struct, frozen=True, kw_only=True):
    """Over any of these (compared after each wave and while it soaks) the campaign aborts and rolls the
    wave back. ``max_anomaly_ratio``: anomalies per updated device over anomalies per device not yet
    updated, in the same window. ``min_convergence_ratio`` (not in the contract's body; default 0.5):
    commands to updated devices converge at least this share as often as those to the others."""

    max_failed_pct: float
    max_offline_pct: float
    max_anomaly_ratio: float
    min_convergence_ratio: float = 0.5


class TargetDevice(msgspec.Struct, frozen=True, kw_only=True):
    device_id: str
    previous_version: str | None  # the firmware it reported when the campaign started (its rollback)


# -------------------------------------------------------------------------------------------- requests


class CampaignRequest(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    request_id: uuid.UUID
    sent_at: datetime


class RegisterFirmware(CampaignRequest, frozen=True, kw_only=True, tag="register_firmware"):
    firmware: Firmware


class StartCampaign(CampaignRequest, frozen=True, kw_only=True, tag="start_campaign"):
    campaign_id: uuid.UUID
    firmware: Firmware
    home_ids: tuple[str, ...] = ()
    device_ids: tuple[str, ...] = ()
    waves: tuple[float, ...]
    soak_s: float
    abort: AbortThresholds
    job_timeout_s: float = 300.0


class AbortCampaign(CampaignRequest, frozen=True, kw_only=True, tag="abort_campaign"):
    campaign_id: uuid.UUID
    reason: str = "requested"


# ---------------------------------------------------------------------------------------------- facts


class CampaignFact(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    event_id: uuid.UUID
    campaign_id: str
    version: int
    occurred_at: datetime
    recorded_at: datetime


class FirmwareRegistered(CampaignFact, frozen=True, kw_only=True, tag="firmware.registered"):
    firmware: Firmware


class CampaignStarted(CampaignFact, frozen=True, kw_only=True, tag="campaign.started"):
    firmware: Firmware
    devices: tuple[TargetDevice, ...]
    waves: tuple[float, ...]
    soak_s: float
    abort: AbortThresholds
    job_timeout_s: float


class WaveStarted(CampaignFact, frozen=True, kw_only=True, tag="campaign.wave_started"):
    wave: int  # 0-based
    device_ids: tuple[str, ...]


class JobMoved(CampaignFact, frozen=True, kw_only=True, tag="campaign.job_moved"):
    """A device's job changed state; ``command_id`` names the device command it sent (``sent``, and a
    rollback's ``update_firmware``), ``reason`` says why it failed or timed out."""

    device_id: str
    state: JobState
    command_id: uuid.UUID | None = None
    reason: str = ""


class RollbackSent(CampaignFact, frozen=True, kw_only=True, tag="campaign.rollback_sent"):
    device_id: str
    command_id: uuid.UUID
    to_version: str


class WavePassed(CampaignFact, frozen=True, kw_only=True, tag="campaign.wave_passed"):
    wave: int
    health: dict[str, Any]  # the gate figures it passed with


class CampaignCompleted(CampaignFact, frozen=True, kw_only=True, tag="campaign.completed"):
    pass


class CampaignAborted(CampaignFact, frozen=True, kw_only=True, tag="campaign.aborted"):
    wave: int
    reason: str  # the gate crossed (failed_pct, offline_pct, anomaly_ratio, convergence_ratio) or requested
    health: dict[str, Any]


FACT_TYPES: tuple[type[CampaignFact], ...] = (
    FirmwareRegistered,
    CampaignStarted,
    WaveStarted,
    JobMoved,
    RollbackSent,
    WavePassed,
    CampaignCompleted,
    CampaignAborted,
)
REQUEST_TYPES: tuple[type[CampaignRequest], ...] = (RegisterFirmware, StartCampaign, AbortCampaign)
AnyCampaignFact: TypeAlias = Union[FACT_TYPES]  # type: ignore[valid-type]  # noqa: UP007
AnyCampaignRequest: TypeAlias = Union[REQUEST_TYPES]  # type: ignore[valid-type]  # noqa: UP007

_fact_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(AnyCampaignFact)
_request_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(AnyCampaignRequest)
encode_campaign_record = msgspec.json.Encoder().encode


def fact_wire_type(cls: type[msgspec.Struct]) -> str:
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


def firmware_key(device_type: str, version: str) -> str:
    """The id a firmware's registration is recorded under (the campaigns topic's key)."""
    return f"firmware:{device_type}:{version}"


def decode_campaign_fact(data: bytes | None) -> CampaignFact:
    try:
        fact: CampaignFact = _fact_decoder.decode(data or b"")
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        raise MalformedRecord("invalid_campaign_fact", str(exc) or type(exc).__name__) from exc
    return fact


def decode_campaign_request(data: bytes | None) -> CampaignRequest:
    try:
        request: CampaignRequest = _request_decoder.decode(data or b"")
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        raise MalformedRecord("invalid_campaign_request", str(exc) or type(exc).__name__) from exc
    return request
