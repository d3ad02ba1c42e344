"""Graceful overload: a device's state reports in one telemetry batch folded into one, when the worker is
behind (the contract's "Commands before telemetry": readings may be coalesced, commands never are).

Why: a worker that decides every reading of a device that reports faster than it can fold falls further
behind with every batch, and the lag grows without bound. When the telemetry lane is behind (``InboxFeed``
says when), the reports of one device in a batch become one: the newest, carrying every key any of them
reported (a report may name some keys only), each key at its newest value. The twin ends where deciding
them one by one would have left it; the history keeps one fact for the batch instead of one per reading.

What it never does: touch a request that is not a state report, or a device with anything else in the
batch (its order against that request would matter), or a report that came after a newer one of the device
(``device_seq`` at or below the twin's: deciding it records only the keys no newer report carried, and
merging its keys would bring back older values). A key of a merged report counts as carried at the
merged report's seq: a report older than it but later still records nothing of that key. Every report
folded into another is counted (``Coalesced``), never silently dropped: the count is the actor's metric,
in its serving file and ``hearth status``, and in its log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from hearth_shared.schema.events import Inbound, ReportState

R = TypeVar("R")  # what a request arrived in (the inbox record), carried along unchanged


@dataclass
class Coalesced:
    """What coalescing did since the worker started."""

    reports: int = 0  # reports folded into a newer one of the same device and batch
    batches: int = 0  # telemetry batches it coalesced


def merge(reports: Sequence[ReportState]) -> ReportState:
    """The newest report (by ``device_seq``) with every key the reports named, each at its newest value."""
    ordered = sorted(reports, key=lambda r: r.device_seq)
    state: dict[str, Any] = {}
    for report in ordered:
        state.update(report.state)
    return msgspec.structs.replace(ordered[-1], state=state)


def coalesce(
    batch: Sequence[tuple[R, Inbound]], last_seq: Callable[[str], int]
) -> tuple[list[tuple[R, Inbound]], int]:
    """The batch with each device's state reports folded into one (at the place of its newest), and how
    many reports were folded away. ``last_seq(device_id)``: the newest ``device_seq`` the twin has (-1
    for none). A device with any other request in the batch keeps all of its requests as they are."""
    by_device: dict[str, list[int]] = {}
    others: set[str] = set()
    for i, (_, request) in enumerate(batch):
        if isinstance(request, ReportState):
            by_device.setdefault(request.device_id, []).append(i)
        else:
            others.add(request.device_id)
    replaced: dict[int, Inbound] = {}
    dropped: set[int] = set()
    for device_id, places in by_device.items():
        if len(places) < 2 or device_id in others:
            continue
        seen = last_seq(device_id)
        fresh = [i for i in places if _report(batch[i][1]).device_seq > seen]
        if len(fresh) < 2:
            continue
        merged = merge([_report(batch[i][1]) for i in fresh])
        newest = max(fresh, key=lambda i: _report(batch[i][1]).device_seq)
        replaced[newest] = merged
        dropped.update(i for i in fresh if i != newest)
    out = [
        (record, replaced.get(i, request)) for i, (record, request) in enumerate(batch) if i not in dropped
    ]
    return out, len(dropped)


def _report(request: Inbound) -> ReportState:
    assert isinstance(request, ReportState)
    return request
