"""Wave sizes and health gates of a firmware campaign: pure functions over what the driver sees.

* ``wave_sizes(n, waves)``: cumulative percents -> how many devices each wave takes (every wave at least
  one more device while any are left; the last takes the rest).
* ``wave_health(campaign, fleet, now)``: the current wave compared with the devices not yet updated:
  failed installs (failed + timed out, share of the wave's devices), devices gone offline (share of the
  updated devices offline beyond the share of the others offline), anomaly ratio (anomalies per
  device-second of the updated devices since their update, over the same rate of the others since the
  wave started; the others' rate is floored at one anomaly, and the ratio is only judged from
  ``MIN_ANOMALIES`` on, so one stray anomaly of one device aborts nothing) and command convergence
  (share of the homes' own commands that converged, updated over the others, from ``MIN_COMMANDS`` each).
* ``crossed_gate(health, thresholds)``: the first gate over its threshold, or None.

The driver sees the fleet through ``FleetSight`` (built from the device journal, see hearth_campaigns).
"""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Mapping
from datetime import datetime

import msgspec

from hearth_shared.domain.campaign import Campaign
from hearth_shared.schema.campaign_events import AbortThresholds

MIN_ANOMALIES = 3
MIN_COMMANDS = 5


class CommandSight(msgspec.Struct, frozen=True, kw_only=True):
    """A device command's status as the journal last said it."""

    status: str
    reason: str = ""
    at: datetime


class CommandOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How one of a home's own commands to a device ended."""

    at: datetime
    converged: bool


class DeviceSight(msgspec.Struct, frozen=True, kw_only=True):
    """What the driver knows about one device from the journal."""

    device_id: str
    home_id: str
    device_type: str
    online: bool = False
    firmware_version: str | None = None
    anomalies: tuple[datetime, ...] = ()  # recent anomaly facts' times (bounded)
    outcomes: tuple[CommandOutcome, ...] = ()  # recent non-campaign commands


class FleetSight(msgspec.Struct, frozen=True, kw_only=True):
    devices: Mapping[str, DeviceSight]
    commands: Mapping[uuid.UUID, CommandSight]  # the campaign commands' statuses


class WaveHealth(msgspec.Struct, frozen=True, kw_only=True):
    wave: int
    size: int
    ended: int
    failed: int
    failed_pct: float
    updated: int
    offline_pct: float  # updated devices offline beyond the others' share, in percent points
    anomaly_ratio: float | None  # None: too few anomalies (or no devices left to compare with)
    convergence_ratio: float | None  # None: too few commands to judge


def wave_sizes(n: int, waves: tuple[float, ...] | list[float]) -> list[int]:
    """How many devices each wave takes, from cumulative percents (e.g. 1, 10, 100)."""
    if not waves or any(b < a for a, b in itertools.pairwise(waves)) or waves[-1] != 100:
        raise ValueError("waves are cumulative percents, increasing, ending at 100")
    sizes, taken = [], 0
    for i, pct in enumerate(waves):
        cumulative = n if i == len(waves) - 1 else min(n, max(taken + 1, math.ceil(n * pct / 100)))
        sizes.append(cumulative - taken)
        taken = cumulative
    return sizes


def wave_devices(campaign: Campaign, wave: int) -> tuple[str, ...]:
    """The device ids of ``wave`` (its slice of the campaign's order)."""
    sizes = wave_sizes(len(campaign.order), campaign.waves)
    start = sum(sizes[:wave])
    return campaign.order[start : start + sizes[wave]]


def wave_health(campaign: Campaign, fleet: FleetSight, now: datetime) -> WaveHealth:
    wave = max(campaign.wave, 0)
    in_wave = [campaign.jobs[d] for d in wave_devices(campaign, wave)]
    ended = [j for j in in_wave if j.state in ("succeeded", "failed", "timed_out", "rolled_back")]
    failed = [j for j in in_wave if j.state in ("failed", "timed_out")]
    updated = [j for j in campaign.jobs.values() if j.state == "succeeded"]
    others = [j for j in campaign.jobs.values() if j.state == "queued"]
    since = campaign.wave_started_at or now

    def sight(device_id: str) -> DeviceSight | None:
        return fleet.devices.get(device_id)

    offline_updated = _share([not s.online for j in updated if (s := sight(j.device_id))])
    offline_others = _share([not s.online for j in others if (s := sight(j.device_id))])

    anomalies_u, exposure_u, outcomes_u = 0, 0.0, list[bool]()
    for job in updated:
        s, after = sight(job.device_id), job.changed_at or since
        if s is None:
            continue
        anomalies_u += sum(1 for t in s.anomalies if t >= after)
        exposure_u += max((now - after).total_seconds(), 1.0)
        outcomes_u += [o.converged for o in s.outcomes if o.at >= after]
    anomalies_o, outcomes_o = 0, list[bool]()
    for job in others:
        s = sight(job.device_id)
        if s is None:
            continue
        anomalies_o += sum(1 for t in s.anomalies if t >= since)
        outcomes_o += [o.converged for o in s.outcomes if o.at >= since]
    exposure_o = len(others) * max((now - since).total_seconds(), 1.0)

    anomaly_ratio = None
    if anomalies_u >= MIN_ANOMALIES and others:
        anomaly_ratio = (anomalies_u / exposure_u) / (max(anomalies_o, 1) / exposure_o)
    convergence_ratio = None
    if len(outcomes_u) >= MIN_COMMANDS and len(outcomes_o) >= MIN_COMMANDS:
        rate_o = sum(outcomes_o) / len(outcomes_o)
        convergence_ratio = (sum(outcomes_u) / len(outcomes_u)) / rate_o if rate_o else None
    return WaveHealth(
        wave=wave,
        size=len(in_wave),
        ended=len(ended),
        failed=len(failed),
        failed_pct=100.0 * len(failed) / len(in_wave) if in_wave else 0.0,
        updated=len(updated),
        offline_pct=max(0.0, 100.0 * (offline_updated - offline_others)),
        anomaly_ratio=anomaly_ratio,
        convergence_ratio=convergence_ratio,
    )


def crossed_gate(health: WaveHealth, limits: AbortThresholds) -> str | None:
    """The gate ``health`` crossed (``failed_pct``, ``offline_pct``, ``anomaly_ratio``,
    ``convergence_ratio``), or None."""
    if health.failed_pct > limits.max_failed_pct:
        return "failed_pct"
    if health.offline_pct > limits.max_offline_pct:
        return "offline_pct"
    if health.anomaly_ratio is not None and health.anomaly_ratio > limits.max_anomaly_ratio:
        return "anomaly_ratio"
    if health.convergence_ratio is not None and health.convergence_ratio < limits.min_convergence_ratio:
        return "convergence_ratio"
    return None


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0
