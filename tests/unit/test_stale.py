"""What an unclean stop leaves behind (hearth_devstack.supervision.stale) and `hearth status`, with real
processes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from hearth.cli import app
from hearth_devstack.supervision.process import ManagedProcess
from hearth_devstack.supervision.stale import (
    UP_PID,
    clear_stale_postmaster_pid,
    running_supervisor,
    stop_orphans,
)
from hearth_devstack.supervision.status import PartStatus, write_status
from tests.support.waiting import eventually

pytestmark = pytest.mark.unit


def group(pgid: int) -> list[int]:
    """The living (not zombie) processes of a process group."""
    members = []
    for p in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error):
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(p.pid)
    return members


def dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[ManagedProcess]:
    """A part that keeps running, with a child of its own in its process group (like uvicorn workers)."""
    script = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"  # noqa: E501
    part = ManagedProcess("sleeper", [sys.executable, "-c", script], tmp_path / "sleeper.log", lambda: True)
    part.start()
    yield part
    part.kill_leftovers()


def test_an_up_pid_of_a_dead_or_younger_process_is_stale(tmp_path: Path) -> None:
    (tmp_path / UP_PID).write_text(str(dead_pid()))
    assert running_supervisor(tmp_path) is None
    assert not (tmp_path / UP_PID).exists()
    (tmp_path / UP_PID).write_text(str(os.getpid()))
    assert running_supervisor(tmp_path) == os.getpid()
    old = time.time() - 3600 * 24 * 365  # written before this process existed: the pid was reused
    os.utime(tmp_path / UP_PID, (old, old))
    assert running_supervisor(tmp_path) is None


async def test_parts_a_killed_supervisor_left_are_stopped_with_their_children(
    tmp_path: Path, sleeper: ManagedProcess
) -> None:
    pid = sleeper.pid
    assert pid is not None
    await eventually(lambda: len(group(pid)) == 2, "the sleeper and its child", timeout_s=30)
    parts = [PartStatus("sleeper", state="running", pid=sleeper.pid), PartStatus("gone", pid=dead_pid())]
    write_status(tmp_path, parts, supervisor_pid=dead_pid())
    lines: list[str] = []
    assert stop_orphans(tmp_path, lines.append, grace_s=5) == ["sleeper"]
    assert sleeper.exit_code() is not None
    assert group(pid) == []
    assert "sleeper" in lines[0] and "unclean stop" in lines[0]


def test_orphans_are_stopped_dependants_first_so_each_stops_while_what_it_uses_runs(tmp_path: Path) -> None:
    def sleeping(name: str) -> ManagedProcess:
        argv = [sys.executable, "-c", "import time; time.sleep(600)"]
        part = ManagedProcess(name, argv, tmp_path / f"{name}.log", lambda: True)
        part.start()
        return part

    server, service = sleeping("kafka"), sleeping("projector")
    try:
        assert server.pid is not None and service.pid is not None
        parts = [
            PartStatus("kafka", pid=server.pid),
            PartStatus("projector", pid=service.pid, depends_on=["kafka"]),
        ]
        write_status(tmp_path, parts, supervisor_pid=dead_pid())
        running_when_named: dict[str, tuple[bool, bool]] = {}

        def report(line: str) -> None:  # said just before its wave is signalled
            running_when_named[line.split()[0]] = (service.exit_code() is None, server.exit_code() is None)

        assert sorted(stop_orphans(tmp_path, report, grace_s=5)) == ["kafka", "projector"]
        assert running_when_named == {"projector": (True, True), "kafka": (False, True)}
        assert server.exit_code() is not None
    finally:
        server.kill_leftovers()
        service.kill_leftovers()


def test_parts_of_a_live_supervisor_are_left_alone(tmp_path: Path, sleeper: ManagedProcess) -> None:
    write_status(tmp_path, [PartStatus("sleeper", pid=sleeper.pid)], supervisor_pid=os.getpid())
    assert stop_orphans(tmp_path, print) == []
    assert sleeper.exit_code() is None


def test_a_postmaster_pid_naming_another_live_process_is_removed(tmp_path: Path) -> None:
    pid_file = tmp_path / "postmaster.pid"
    pid_file.write_text(f"{os.getpid()}\n{tmp_path}\n")  # a live pid, but not a postgres
    assert clear_stale_postmaster_pid(tmp_path)
    assert not pid_file.exists()
    pid_file.write_text(f"{dead_pid()}\n{tmp_path}\n")  # PostgreSQL clears a dead pid itself
    assert not clear_stale_postmaster_pid(tmp_path)
    assert pid_file.exists()


def test_status_reads_the_status_file_as_a_table_or_json(tmp_path: Path) -> None:
    parts = [
        PartStatus("kafka", state="running", health="healthy", pid=os.getpid(), healthy_after_s=3.2),
        PartStatus(
            "projector", state="backoff", health="down", restarts=2, last_exit="was killed by signal 9"
        ),
    ]
    write_status(tmp_path, parts, supervisor_pid=os.getpid())
    runner = CliRunner()
    result = runner.invoke(app, ["status", "--stack-dir", str(tmp_path), "--json"])
    assert result.exit_code == 1, result.output  # running, one part not healthy
    document = json.loads(result.stdout)
    assert document["running"] is True
    assert [(p["name"], p["restarts"], p["last_exit"]) for p in document["parts"]] == [
        ("kafka", 0, None),
        ("projector", 2, "was killed by signal 9"),
    ]
    table = runner.invoke(app, ["status", "--stack-dir", str(tmp_path)])
    assert "projector" in table.stdout and "was killed by signal 9" in table.stdout
    write_status(tmp_path, parts, supervisor_pid=dead_pid())
    assert runner.invoke(app, ["status", "--stack-dir", str(tmp_path)]).exit_code == 3  # not running
    assert runner.invoke(app, ["status", "--stack-dir", str(tmp_path / "none"), "--json"]).exit_code == 3
