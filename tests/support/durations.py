"""Per-test durations kept from each run (a pytest plugin, loaded by tests/conftest.py).

Every run writes ``.hearth/test-durations.json``: when it ran, on what machine (cores, load at the start
and at the end, and how busy its cores were over the run: what running tests side by side could gain),
how many workers ran the tests (pytest-xdist's ``-n``; 1 without it), the pytest wall time, and each
test's seconds (setup + call + teardown), slowest first, with its outcome, the worker that ran it, and
the machine's busy CPU seconds over those seconds (``busy_s``: every process on every core; in a run with
one worker that is the test's own cost, its servers and services included, and ``busy_s`` well below
``s`` is a test that mostly waits).
The previous run's file is kept beside it (``test-durations.previous.json``), so what a change made
slower is one comparison away (``--durations`` shows only one run's slowest, on screen).

``.hearth/test-seconds.json`` is the other record: every test's seconds in the last run that ran it,
merged run after run, so a run of the unit tests alone (``make check``) forgets nothing of the chaos
tests' seconds. The next run orders its tests by it (``tests/support/distribution.py``).

Under xdist only the controller writes the file: it sees every worker's reports, and a worker that wrote
its own share would race the others for the one file. A test's name is its node id without the
``@group`` xdist adds to grouped tests, so a name is the same with and without workers.
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
KNOWN = Path(".hearth") / "test-seconds.json"

_seconds: defaultdict[str, float] = defaultdict(float)
_outcomes: dict[str, str] = {}
_workers: dict[str, str] = {}
_busy: defaultdict[str, float] = defaultdict(float)
_started = {"wall": 0.0, "load": 0.0, "busy": 0.0, "total": 0.0}


def plain_nodeid(nodeid: str) -> str:
    """The node id without the ``@group`` suffix xdist's loadgroup gives a grouped test (a ``@`` inside
    a parameter's id, before the closing ``]``, is the test's own)."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


def known_seconds(root: Path) -> dict[str, float]:
    """Each test's seconds in the last run that ran it (empty before the first run under ``root``)."""
    try:
        known = json.loads((root / KNOWN).read_text())
        return {str(test): float(seconds) for test, seconds in known.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _cpu() -> tuple[float, float]:
    """The machine's busy and total CPU seconds so far (every core)."""
    times = psutil.cpu_times()
    total = sum(times)
    return total - times.idle - getattr(times, "iowait", 0.0), total


def pytest_sessionstart(session: pytest.Session) -> None:
    _started["wall"] = time.monotonic()
    _started["load"] = os.getloadavg()[0]
    _started["busy"], _started["total"] = _cpu()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """In the process that runs the test: the machine's busy CPU seconds over its setup, call and
    teardown, carried to the controller in the reports' user properties (xdist sends those along)."""
    before, _ = _cpu()
    item.user_properties.append(("busy_at_start", before))
    return (yield)


@pytest.hookimpl(tryfirst=True)  # before pytest builds the report from the user properties
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    if call.when == "teardown":
        start = dict(item.user_properties).get("busy_at_start")
        if isinstance(start, float):
            item.user_properties.append(("busy_s", _cpu()[0] - start))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    name = plain_nodeid(report.nodeid)
    _seconds[name] += report.duration
    if report.when == "teardown":
        busy = dict(report.user_properties).get("busy_s")
        _busy[name] = busy if isinstance(busy, float) else 0.0
    if report.when == "call" or report.outcome != "passed":
        _outcomes[name] = report.outcome
    gateway = getattr(getattr(report, "node", None), "gateway", None)  # set by xdist's controller
    _workers[name] = str(getattr(gateway, "id", "main"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _seconds or _is_worker(session.config):
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
        "workers": len(session.config.getoption("tx", default=None) or []) or 1,
        "wall_s": round(time.monotonic() - _started["wall"], 1),
        "exit_status": int(exitstatus),
        "tests": [
            {
                "test": t,
                "s": round(s, 3),
                "busy_s": round(_busy[t], 3),
                "outcome": _outcomes.get(t, "passed"),
                "worker": _workers[t],
            }
            for t, s in tests
        ],
    }
    out.write_text(json.dumps(document, indent=1))
    known = known_seconds(root) | {t: round(s, 3) for t, s in tests}
    (root / KNOWN).write_text(json.dumps(dict(sorted(known.items())), indent=0))
