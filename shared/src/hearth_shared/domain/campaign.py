"""A firmware campaign's state, and ``evolve_campaign``: one campaign fact applied to it.

Pure and deterministic like the device twin (twin.py, evolve.py): the campaign driver folds the campaign
journal into ``Campaign``s at start, so a campaign replays, and survives a restart halfway through a
wave, from its facts alone (hearth_shared.schema.campaign_events). What happens next is decided in
campaign_decide.py, the health gates in campaign_gates.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import msgspec

from hearth_shared.schema.campaign_events import (
    AbortThresholds,
    CampaignAborted,
    CampaignCompleted,
    CampaignFact,
    CampaignStarted,
    CampaignStatus,
    Firmware,
    FirmwareRegistered,
    JobMoved,
    JobState,
    RollbackSent,
    WavePassed,
    WaveStarted,
)


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """One device's part in a campaign."""

    device_id: str
    previous_version: str | None
    state: JobState = "queued"
    wave: int | None = None
    command_id: uuid.UUID | None = None
    reason: str = ""
    changed_at: datetime | None = None  # when it last changed state (a sent job's timeout runs from here)
    rollback_command_id: uuid.UUID | None = None
    rollback_to: str | None = None
    rollback_ended: bool = False  # rolled back, or the rollback failed (``reason`` says how)


class Campaign(msgspec.Struct, frozen=True, kw_only=True):
    campaign_id: str
    firmware: Firmware
    waves: tuple[float, ...]
    soak_s: float
    abort: AbortThresholds
    job_timeout_s: float
    jobs: dict[str, Job]  # by device id, in the campaign's order
    order: tuple[str, ...]  # device ids in the order waves take them
    status: CampaignStatus = "running"
    wave: int = -1  # the current wave, -1 before the first
    wave_started_at: datetime | None = None
    waves_passed: tuple[dict[str, object], ...] = ()  # the health each passed wave showed
    abort_reason: str = ""
    abort_health: dict[str, object] = msgspec.field(default_factory=dict)
    started_at: datetime
    ended_at: datetime | None = None
    version: int


FirmwareCatalog = dict[tuple[str, str], Firmware]  # (device_type, version) -> firmware


def register_firmware(catalog: FirmwareCatalog, fact: FirmwareRegistered) -> None:
    """Fold a firmware registration into the catalog (the one mutable fold: a plain index)."""
    catalog[(fact.firmware.device_type, fact.firmware.version)] = fact.firmware


def evolve_campaign(campaign: Campaign | None, fact: CampaignFact) -> Campaign:
    """The campaign after ``fact``; facts at or below its version were applied already (ignored)."""
    if campaign is None:
        if not isinstance(fact, CampaignStarted):
            raise ValueError(f"{type(fact).__name__} v{fact.version} of {fact.campaign_id} before its start")
        jobs = {
            d.device_id: Job(device_id=d.device_id, previous_version=d.previous_version) for d in fact.devices
        }
        return Campaign(
            campaign_id=fact.campaign_id,
            firmware=fact.firmware,
            waves=fact.waves,
            soak_s=fact.soak_s,
            abort=fact.abort,
            job_timeout_s=fact.job_timeout_s,
            jobs=jobs,
            order=tuple(d.device_id for d in fact.devices),
            started_at=fact.occurred_at,
            version=fact.version,
        )
    if fact.version <= campaign.version:
        return campaign
    if isinstance(fact, WaveStarted | JobMoved | RollbackSent):
        jobs = dict(campaign.jobs)
        return _with_jobs(campaign, fact, jobs)
    return msgspec.structs.replace(campaign, version=fact.version, **_changes(campaign, fact))


def fold_campaign(campaign: Campaign | None, facts: Iterable[CampaignFact]) -> Campaign | None:
    """``evolve_campaign`` over many facts, copying the jobs once, not once per fact (a wave of 9,000
    devices is 9,000 job facts: per-fact copies made folding it quadratic)."""
    jobs: dict[str, Job] | None = None
    for fact in facts:
        if campaign is None or fact.version <= campaign.version:
            campaign = evolve_campaign(campaign, fact)
        elif isinstance(fact, WaveStarted | JobMoved | RollbackSent):
            if jobs is None:
                jobs = dict(campaign.jobs)
            campaign = _with_jobs(campaign, fact, jobs)
        else:
            campaign = msgspec.structs.replace(campaign, version=fact.version, **_changes(campaign, fact))
    return campaign


def _with_jobs(
    campaign: Campaign, fact: WaveStarted | JobMoved | RollbackSent, jobs: dict[str, Job]
) -> Campaign:
    """The campaign after a fact about jobs, applied to ``jobs`` (a copy the caller owns) in place."""
    at = fact.occurred_at
    if isinstance(fact, WaveStarted):
        for device_id in fact.device_ids:
            jobs[device_id] = msgspec.structs.replace(jobs[device_id], wave=fact.wave, changed_at=at)
        return msgspec.structs.replace(
            campaign, version=fact.version, wave=fact.wave, wave_started_at=at, jobs=jobs
        )
    job = jobs[fact.device_id]
    if isinstance(fact, JobMoved):
        jobs[fact.device_id] = msgspec.structs.replace(
            job,
            state=fact.state,
            command_id=fact.command_id if fact.state == "sent" else job.command_id,
            reason=fact.reason,
            changed_at=at,
            rollback_ended=job.rollback_ended or job.rollback_command_id is not None,
        )
    else:
        jobs[fact.device_id] = msgspec.structs.replace(
            job, rollback_command_id=fact.command_id, rollback_to=fact.to_version
        )
    return msgspec.structs.replace(campaign, version=fact.version, jobs=jobs)


def _changes(campaign: Campaign, fact: CampaignFact) -> dict[str, Any]:
    """The campaign fields a fact that is not about jobs changes."""
    at = fact.occurred_at
    if isinstance(fact, WavePassed):
        return {"waves_passed": (*campaign.waves_passed, fact.health)}
    if isinstance(fact, CampaignCompleted):
        return {"status": "completed", "ended_at": at}
    if isinstance(fact, CampaignAborted):
        return {"status": "aborted", "ended_at": at, "abort_reason": fact.reason, "abort_health": fact.health}
    return {}
