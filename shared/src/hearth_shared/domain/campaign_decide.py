"""What a firmware campaign does next: pure decisions over its state, what the driver sees and the clock.

* ``start_campaign(request, fleet, now)``: the ``campaign.started`` fact (its target set frozen, each
  device with the firmware it reports now: what a rollback returns it to), or a reason it cannot start.
* ``advance(campaign, catalog, fleet, now)``: the facts the passing of time and the fleet's facts lead
  to. While running: start the next wave (each job ``sent`` with a command id derived from the campaign
  and device, so a resent command is the same command); move jobs as their command moves
  (acknowledged -> ``in_progress``, converged -> ``succeeded``, failed or rejected -> ``failed``,
  expired or no end within ``job_timeout_s`` -> ``timed_out``); judge the gates (campaign_gates.py) all
  along, so a crossed gate aborts at once; once every job of the wave ended and ``soak_s`` passed since
  the last one did, the wave passes and the next starts (or the campaign completes). Once aborted:
  follow each rollback to ``rolled_back`` (or its failure, in ``reason``).
* ``abort(campaign, catalog, reason, health, now)``: ``campaign.aborted`` and a rollback of each of the
  wave's devices the update may have reached (sent, in progress, succeeded, timed out) to the firmware it
  had, if that firmware is registered (else ``reason`` says ``no_rollback_firmware``).
* ``awaited_commands(campaigns)``: the device commands whose statuses ``advance`` may still read (what
  the driver's fleet view keeps of the admin commands, so it stays bounded by the campaigns under way).

Device commands are never decided here: the driver derives them from ``campaign.job_moved`` (``sent``)
and ``campaign.rollback_sent`` facts after recording them, so what it sends is always in the journal.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

import msgspec

from hearth_shared.domain.campaign import Campaign, FirmwareCatalog, Job, fold_campaign
from hearth_shared.domain.campaign_gates import FleetSight, crossed_gate, wave_devices, wave_health
from hearth_shared.schema.campaign_events import (
    CampaignAborted,
    CampaignCompleted,
    CampaignFact,
    CampaignStarted,
    JobMoved,
    JobState,
    RollbackSent,
    StartCampaign,
    TargetDevice,
    WavePassed,
    WaveStarted,
)

COMMAND_NAMESPACE = uuid.UUID("6b0f8d1e-3c2a-4f57-9a11-2f4e8c7d5b90")
ROLLBACK_FROM = ("sent", "in_progress", "succeeded", "timed_out")


class CampaignChange(msgspec.Struct, frozen=True):
    """A campaign fact to record, before its envelope (``stamp_campaign`` adds it)."""

    fact_type: type[CampaignFact]
    fields: dict[str, Any]


class CampaignRefused(ValueError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


def job_command_id(campaign_id: str, device_id: str, purpose: str = "update") -> uuid.UUID:
    return uuid.uuid5(COMMAND_NAMESPACE, f"{campaign_id}/{device_id}/{purpose}")


def start_campaign(request: StartCampaign, fleet: FleetSight) -> CampaignChange:
    """The start of a campaign over the devices of its type that the request names (all of them with
    ``device_ids``, which must exist and be of the type; every one of those homes with ``home_ids``)."""
    kind = request.firmware.device_type
    if request.device_ids:
        unknown = [d for d in request.device_ids if d not in fleet.devices]
        wrong = [d for d in request.device_ids if d in fleet.devices and fleet.devices[d].device_type != kind]
        if unknown or wrong:
            raise CampaignRefused("bad_target", f"unknown devices {unknown[:5]}, not {kind}: {wrong[:5]}")
        chosen = list(dict.fromkeys(request.device_ids))
    else:
        homes = set(request.home_ids)
        chosen = sorted(
            d.device_id for d in fleet.devices.values() if d.device_type == kind and d.home_id in homes
        )
    if not chosen:
        raise CampaignRefused("empty_target", f"no {kind} devices in the target")
    devices = tuple(
        TargetDevice(device_id=d, previous_version=fleet.devices[d].firmware_version) for d in chosen
    )
    return CampaignChange(
        CampaignStarted,
        {
            "firmware": request.firmware,
            "devices": devices,
            "waves": request.waves,
            "soak_s": request.soak_s,
            "abort": request.abort,
            "job_timeout_s": request.job_timeout_s,
        },
    )


def advance(
    campaign: Campaign, catalog: FirmwareCatalog, fleet: FleetSight, now: datetime
) -> list[CampaignChange]:
    if campaign.status == "completed":
        return []
    if campaign.status == "aborted":
        return _follow_rollbacks(campaign, fleet)
    if campaign.wave < 0:
        return _start_wave(campaign, 0)
    changes = _follow_jobs(campaign, fleet, now)
    moved = _applied(campaign, changes, now)
    health = wave_health(moved, fleet, now)
    gate = crossed_gate(health, moved.abort)
    if gate is not None:
        return changes + abort(moved, catalog, gate, msgspec.to_builtins(health), now)
    in_wave = [moved.jobs[d] for d in wave_devices(moved, moved.wave)]
    if any(j.state not in ("succeeded", "failed", "timed_out") for j in in_wave):
        return changes
    last_end = max((j.changed_at for j in in_wave if j.changed_at), default=now)
    if (now - last_end).total_seconds() < moved.soak_s:
        return changes
    changes.append(CampaignChange(WavePassed, {"wave": moved.wave, "health": msgspec.to_builtins(health)}))
    if moved.wave + 1 >= len(moved.waves):
        return [*changes, CampaignChange(CampaignCompleted, {})]
    return changes + _start_wave(moved, moved.wave + 1)


def abort(
    campaign: Campaign, catalog: FirmwareCatalog, reason: str, health: dict[str, Any], now: datetime
) -> list[CampaignChange]:
    if campaign.status != "running":
        return []
    changes = [
        CampaignChange(CampaignAborted, {"wave": max(campaign.wave, 0), "reason": reason, "health": health})
    ]
    if campaign.wave < 0:
        return changes
    kind = campaign.firmware.device_type
    for device_id in wave_devices(campaign, campaign.wave):
        job = campaign.jobs[device_id]
        if job.state not in ROLLBACK_FROM:
            continue
        back = catalog.get((kind, job.previous_version or ""))
        if back is None:
            why = f"no_rollback_firmware: {job.previous_version or 'unknown'} is not registered"
            changes.append(_move(job, job.state, reason=why))
            continue
        command_id = job_command_id(campaign.campaign_id, device_id, "rollback")
        changes.append(
            CampaignChange(
                RollbackSent, {"device_id": device_id, "command_id": command_id, "to_version": back.version}
            )
        )
    return changes


def _start_wave(campaign: Campaign, wave: int) -> list[CampaignChange]:
    devices = wave_devices(campaign, wave)
    changes = [CampaignChange(WaveStarted, {"wave": wave, "device_ids": devices})]
    for device_id in devices:
        command_id = job_command_id(campaign.campaign_id, device_id)
        changes.append(_move(campaign.jobs[device_id], "sent", command_id=command_id))
    return changes


def _follow_jobs(campaign: Campaign, fleet: FleetSight, now: datetime) -> list[CampaignChange]:
    changes = []
    for device_id in wave_devices(campaign, campaign.wave):
        job = campaign.jobs[device_id]
        if job.state not in ("sent", "in_progress") or job.command_id is None:
            continue
        seen = fleet.commands.get(job.command_id)
        status = seen.status if seen else "pending"
        if status == "converged":
            changes.append(_move(job, "succeeded"))
        elif status in ("failed", "rejected", "superseded"):
            changes.append(_move(job, "failed", reason=(seen.reason if seen else "") or status))
        elif status == "expired":
            changes.append(_move(job, "timed_out", reason="command_expired"))
        elif job.changed_at and (now - job.changed_at).total_seconds() >= campaign.job_timeout_s:
            changes.append(
                _move(
                    job,
                    "timed_out",
                    reason=f"no {'install' if status == 'acknowledged' else 'answer'}"
                    f" within {campaign.job_timeout_s:g} s",
                )
            )
        elif status == "acknowledged" and job.state == "sent":
            changes.append(_move(job, "in_progress"))
    return changes


def _follow_rollbacks(campaign: Campaign, fleet: FleetSight) -> list[CampaignChange]:
    changes = []
    for job in campaign.jobs.values():
        if job.rollback_command_id is None or job.rollback_ended:
            continue
        seen = fleet.commands.get(job.rollback_command_id)
        if seen is None:
            continue
        if seen.status == "converged":
            changes.append(_move(job, "rolled_back", reason=f"back on {job.rollback_to}"))
        elif seen.status in ("failed", "rejected", "expired", "superseded"):
            changes.append(
                _move(job, job.state, reason=f"rollback_{seen.status}: {seen.reason}".rstrip(": "))
            )
    return changes


def awaited_commands(campaigns: Iterable[Campaign]) -> set[uuid.UUID]:
    """The device commands whose status ``advance`` may still read: the updates of a running campaign's
    jobs sent or in progress (only the current wave's can be), and every rollback not ended yet. Once a
    job moved on, its command's status is never read again, so the driver's fleet view forgets it."""
    awaited: set[uuid.UUID] = set()
    for campaign in campaigns:
        if campaign.status == "completed" or campaign.wave < 0:
            continue  # no job sent yet, or none left to follow (a completed campaign rolled nothing back)
        for device_id in wave_devices(campaign, campaign.wave):  # earlier waves' jobs all ended
            job = campaign.jobs[device_id]
            if campaign.status == "running" and job.state in ("sent", "in_progress") and job.command_id:
                awaited.add(job.command_id)
            if job.rollback_command_id is not None and not job.rollback_ended:  # the aborted wave's
                awaited.add(job.rollback_command_id)
    return awaited


EVIDENCE_MARGIN = timedelta(minutes=10)  # for the clocks of the actor (facts' times) and the driver


def evidence_since(campaigns: Iterable[Campaign], now: datetime) -> datetime:
    """The oldest time a wave's gates may still read a device's anomalies and command outcomes from: the
    earliest start of a campaign not completed (its gates read only what came after its waves began),
    else ``now``; less ``EVIDENCE_MARGIN``. Older evidence is never read again, so the driver's fleet
    view forgets it: what it keeps is bounded by the campaigns under way, not by the journal's age."""
    return min([c.started_at for c in campaigns if c.status != "completed"] + [now]) - EVIDENCE_MARGIN


def _move(
    job: Job, state: JobState, *, reason: str = "", command_id: uuid.UUID | None = None
) -> CampaignChange:
    return CampaignChange(
        JobMoved, {"device_id": job.device_id, "state": state, "reason": reason, "command_id": command_id}
    )


def _applied(campaign: Campaign, changes: list[CampaignChange], now: datetime) -> Campaign:
    """The campaign with ``changes`` applied (to judge the gates on the jobs' new states)."""

    folded = fold_campaign(
        campaign, stamp_campaign(campaign, changes, now=now, new_id=lambda: uuid.UUID(int=0))
    )
    assert folded is not None
    return folded


def stamp_campaign(
    campaign: Campaign | None,
    changes: list[CampaignChange],
    *,
    now: datetime,
    campaign_id: str | None = None,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
) -> list[CampaignFact]:
    """Wrap changes in envelopes, numbered on from the campaign's version (1 for its start)."""
    cid = campaign.campaign_id if campaign else campaign_id
    assert cid is not None
    start = (campaign.version if campaign else 0) + 1
    return [
        change.fact_type(
            event_id=new_id(),
            campaign_id=cid,
            version=version,
            occurred_at=now,
            recorded_at=now,
            **change.fields,
        )
        for version, change in enumerate(changes, start=start)
    ]
