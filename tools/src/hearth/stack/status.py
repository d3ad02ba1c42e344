"""The status file of a running ``hearth up``: ``<stack dir>/status.json``, read by ``hearth status``.

Why a file and not an endpoint or a signal: the supervisor is the only one who knows restarts, last
exits and health, and it runs in the foreground of a terminal; a small JSON file that it rewrites on
every change needs no port (nothing more to keep free or secure), answers even while the supervisor is
busy restarting something, and outlives an unclean stop, which makes it the record ``hearth up`` uses
to find the processes a killed supervisor left behind (see ``hearth.stack.stale``). It is written
atomically (a temporary file renamed over it), so a reader never sees half of one.

``supervisor_pid`` says whose file it is; a reader checks that process is alive before trusting the
states (a dead supervisor's file describes the past).
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


__all__ = ["PartStatus", "StackStatus", "read_status", "status_path", "write_status"]
