"""The status file of a running ``hearth up``: ``<stack dir>/status.json``, read by ``hearth status``.

Why a file and not an endpoint or a signal: the supervisor is the only one who knows restarts, last
exits and health, and it runs in the foreground of a terminal; a small JSON file that it rewrites on
every change needs no port (nothing more to keep free or secure), answers even while the supervisor is
busy restarting something, and outlives an unclean stop, which makes it the record ``hearth up`` uses
to find the processes a killed supervisor left behind, and the order to stop them in (each part's
``depends_on``; see ``hearth_devstack.supervision.stale``). It is written atomically (a temporary file
renamed over it), so a reader never sees half of one.

``supervisor_pid`` says whose file it is; a reader checks that process is alive before trusting the
states (a dead supervisor's file describes the past).

Beside it, each part's topic followers write their restart reports (``hearth_shared.adapters.topic_follower``:
``{follower}.json`` in the part's ``reports`` directory, once caught up and after each snapshot);
``read_follower_reports`` turns them into what ``hearth status`` shows per part: where the last start
began (snapshot or first offset, and why), how many records it replayed, the gap a retention window
left, how long it took to catch up, and the age of the newest snapshot *now* (the age a report states is
as of its writing, so the time since the file was written is added).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATUS_FILE = "status.json"


@dataclass
class PartStatus:
    name: str
    state: str = "pending"  # pending | starting | running | backoff | waiting | failed | stopped
    health: str = "unknown"  # unknown | starting | healthy | unhealthy | down
    pid: int | None = None
    restarts: int = 0
    last_exit: str | None = None  # why the last run ended ("was killed by signal 9", ...)
    healthy_after_s: float | None = None  # how long the last start took to become healthy
    url: str = ""
    log: str = ""
    note: str = ""
    reports: str = ""  # the directory of its followers' restart reports ("": it has none)
    # The parts it needs healthy to (re)start: what ``stale.stop_orphans`` stops after it (part_order.py).
    depends_on: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FollowerReport:
    """One follower's restart report as ``hearth status`` shows it."""

    part: str
    follower: str
    started_from: str
    replayed: int | None = None
    gap: int | None = None
    caught_up_s: float | None = None
    snapshot_age_s: float | None = None  # of the newest snapshot it saved or restored, now
    snapshots_saved: int | None = None
    snapshot_errors: int | None = None


@dataclass
class StackStatus:
    supervisor_pid: int
    updated_at: float  # epoch seconds
    parts: list[PartStatus] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def status_path(home: Path) -> Path:
    return home / STATUS_FILE


def write_status(home: Path, parts: list[PartStatus], *, supervisor_pid: int | None = None) -> None:
    status = StackStatus(supervisor_pid or os.getpid(), time.time(), parts)
    path = status_path(home)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(status.to_json(), indent=1))
    partial.replace(path)


def read_status(home: Path) -> StackStatus | None:
    """The last status written under ``home``, or None if there is none (or it is unreadable)."""
    try:
        raw = json.loads(status_path(home).read_text())
        parts = [PartStatus(**p) for p in raw["parts"]]
        return StackStatus(int(raw["supervisor_pid"]), float(raw["updated_at"]), parts)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_follower_reports(part: PartStatus, now: float | None = None) -> list[FollowerReport]:
    """The restart reports in ``part.reports``, by follower name; one that cannot be read is listed as
    such (a report is for people: it never hides the others)."""
    if not part.reports:
        return []
    now = time.time() if now is None else now
    reports = []
    for path in sorted(Path(part.reports).glob("*.json")):
        name = path.stem
        try:
            raw = json.loads(path.read_text())
            written_at = path.stat().st_mtime
            age = raw.get("snapshot_age_s")
            reports.append(
                FollowerReport(
                    part=part.name,
                    follower=name,
                    started_from=str(raw["started_from"]),
                    replayed=_int(raw.get("replayed")),
                    gap=_int(raw.get("gap")),
                    caught_up_s=_float(raw.get("caught_up_s")),
                    snapshot_age_s=None if age is None else round(float(age) + max(0.0, now - written_at), 1),
                    snapshots_saved=_int(raw.get("snapshots_saved")),
                    snapshot_errors=_int(raw.get("snapshot_errors")),
                )
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            reports.append(FollowerReport(part.name, name, f"(unreadable report: {error})"))
    return reports


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


__all__ = [
    "FollowerReport",
    "PartStatus",
    "StackStatus",
    "read_follower_reports",
    "read_status",
    "status_path",
    "write_status",
]
