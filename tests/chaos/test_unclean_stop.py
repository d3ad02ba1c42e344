"""`hearth up` killed with -9 leaves its parts running (own sessions) and its up.pid and status file
behind; the next `hearth up` detects all of that, stops the leftovers, and starts; `hearth status` and
`hearth down` work on what it started.

About 50 s for two stacks (it took 100): each starts its parts as soon as what they need is healthy, the
leftovers stop in dependency waves (a gateway no longer waits 10 s for the broker stopping beside it),
and `hearth status` is asked once the status file says every part is healthy, not every second."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from hearth_devstack.supervision.ports import free_port
from hearth_devstack.supervision.status import read_status
from tests.support.waiting import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(900)]


def hearth(*args: str) -> list[str]:
    return [sys.executable, "-c", "from hearth.cli import main; main()", *args]


def status(home: Path) -> dict[str, Any]:
    done = subprocess.run(
        hearth("status", "--stack-dir", str(home), "--json"), capture_output=True, text=True
    )
    document: dict[str, Any] = json.loads(done.stdout)
    document["exit_code"] = done.returncode
    return document


def wait_all_healthy(home: Path, up: subprocess.Popen[bytes], timeout_s: float) -> dict[str, Any]:
    """``hearth status`` once it says every part is healthy (the test is synchronous: one loop run).

    Watched through the status file itself, read in this process, and asked of ``hearth status`` only
    once the file says so: a ``hearth status`` is a Python process starting (about a second of CPU),
    and asked every second it took a core from the stack starting beside it."""
    current: dict[str, Any] = {}

    def all_healthy() -> bool:
        assert up.poll() is None, f"hearth up exited with {up.returncode}: {(home / 'up.out').read_text()}"
        written = read_status(home)  # the stack's own file (not the one a killed `hearth up` left)
        if written is None or written.supervisor_pid != up.pid:
            return False
        current["status_file"] = {p.name: p.health for p in written.parts}
        if any(p.health != "healthy" for p in written.parts):
            return False
        current.update(status(home))
        return bool(current["exit_code"] == 0)

    asyncio.run(
        eventually(all_healthy, "every part healthy", timeout_s=timeout_s, every_s=0.2, shown=current.copy)
    )
    return current


def alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def test_up_starts_again_after_an_unclean_stop(tmp_path: Path) -> None:
    home = tmp_path / "stack"
    # Every port free, the MQTT ones too: `hearth up`'s defaults (1883, 8883, 1884) are taken by a
    # developer's stack, or by another run of this test.
    parts = ("kafka", "kafka-controller", "postgres", "redis", "command-api", "query-api")
    ports = {name: str(free_port()) for name in (*parts, "mqtt", "mqtts", "mqtt-platform")}
    argv = hearth(
        "up", "--stack-dir", str(home), "--no-simulate", "--no-analytics", "--start-timeout-factor", "3"
    )
    argv += [arg for name, port in ports.items() for arg in (f"--{name}-port", port)]

    def start() -> subprocess.Popen[bytes]:
        out = open(home / "up.out", "ab")  # noqa: SIM115 - the child owns it
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    home.mkdir()
    first = start()
    try:
        before = wait_all_healthy(home, first, 600)
        pids = {p["name"]: p["pid"] for p in before["parts"]}
        os.kill(first.pid, signal.SIGKILL)  # no clean-up at all
        first.wait(10)
        assert (home / "up.pid").exists()
        assert all(alive(pid) for pid in pids.values()), "the parts outlive a killed `hearth up`"
        assert status(home)["exit_code"] == 3  # the status file's supervisor is gone: not running

        second = start()
        after = wait_all_healthy(home, second, 600)
        assert not any(alive(pid) for pid in pids.values()), "the leftovers were stopped"
        assert {p["name"] for p in after["parts"]} == set(pids)
        output = (home / "up.out").read_text()
        assert "left running by an unclean stop" in output

        down = subprocess.run(hearth("down", "--stack-dir", str(home)), capture_output=True, text=True)
        assert down.returncode == 0, down.stdout + down.stderr
        second.wait(60)
        restarted = {p["name"]: p["pid"] for p in after["parts"]}
        assert not any(alive(pid) for pid in restarted.values())
        assert status(home)["exit_code"] == 3
    finally:
        for proc in (first, locals().get("second")):
            if isinstance(proc, subprocess.Popen) and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        subprocess.run(hearth("down", "--stack-dir", str(home)), capture_output=True)  # any orphans
