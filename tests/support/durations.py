"""Per-test durations kept from each run (a pytest plugin, loaded by tests/conftest.py).

Every run writes ``.hearth/test-durations.json``: when it ran, on what machine (cores, load at the start
and at the end, and how busy its cores were over the run: what running tests side by side could gain),
the pytest wall time, and each test's seconds (setup + call + teardown), slowest first,
with its outcome. The previous run's file is kept beside it (``test-durations.previous.json``), so what a
change made slower is one comparison away (``--durations`` shows only one run's slowest, on screen).
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

import psutil
import pytest

OUT = Path(".hearth") / "test-durations.json"

_seconds: defaultdict[str, float] = defaultdict(float)
_outcomes: dict[str, str] = {}
_started = {"wall": 0.0, "load": 0.0, "busy": 0.0, "total": 0.0}


def _cpu() -> tuple[float, float]:
    """The machine's busy and total CPU seconds so far (every core)."""
    times = psutil.cpu_times()
    total = sum(times)
    return total - times.idle - getattr(times, "iowait", 0.0), total


def pytest_sessionstart(session: pytest.Session) -> None:
    _started["wall"] = time.monotonic()
    _started["load"] = os.getloadavg()[0]
    _started["busy"], _started["total"] = _cpu()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid] += report.duration
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.nodeid] = report.outcome


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _seconds:
        return
    root = Path(session.config.rootpath)
    out = root / OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.replace(out.with_name("test-durations.previous.json"))
    tests = sorted(_seconds.items(), key=lambda item: item[1], reverse=True)
    busy, total = _cpu()
    busy_pct = 100 * (busy - _started["busy"]) / max(total - _started["total"], 1e-9)
    document = {
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cores": os.cpu_count(),
        "load_at_start": round(_started["load"], 2),
        "load_at_end": round(os.getloadavg()[0], 2),
        "cores_busy_pct": round(busy_pct, 1),
        "wall_s": round(time.monotonic() - _started["wall"], 1),
        "exit_status": int(exitstatus),
        "tests": [{"test": t, "s": round(s, 3), "outcome": _outcomes.get(t, "passed")} for t, s in tests],
    }
    out.write_text(json.dumps(document, indent=1))
