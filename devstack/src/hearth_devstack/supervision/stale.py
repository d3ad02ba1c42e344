"""What an unclean stop leaves behind, detected rather than trusted, so ``hearth up`` starts again.

A pid in a file is only believed if that process is alive *and was created no later than the file was
last written*: a process created afterwards merely reuses the number (common in containers, after a
reboot, or on a busy machine). What each server already handles itself is left to it:

- ``up.pid`` (ours): a dead or reused pid is stale; the file is removed.
- Children of a ``hearth up`` that was killed -9: they run in their own sessions, so they outlive it
  and keep the ports and Kafka's log-dir lock. ``status.json`` names them; those that are still the same
  processes are stopped (SIGTERM to the process group, SIGKILL after a grace period), dependants first,
  in the waves the supervisor stops its parts in (``part_order``; the file records each part's
  ``depends_on``; a file written before it did is stopped all at once).
- PostgreSQL's ``postmaster.pid``: PostgreSQL removes it itself when its pid is dead, and waits for
  the old shared memory to be released; it refuses to start only when the pid now belongs to another
  live process. That case is ours: the file is removed when its pid is not a postgres of this data dir.
- Kafka's ``.lock`` in the log dir is an OS file lock (released with the process that held it) and
  Redis/Valkey writes no pid file in the foreground and loads a truncated append-only file after a
  crash (``aof-load-truncated yes`` by default): nothing to do for either.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from hearth_devstack.supervision.part_order import stop_waves
from hearth_devstack.supervision.status import read_status, status_path

UP_PID = "up.pid"


def same_process(pid: int, written_at: float) -> psutil.Process | None:
    """The process ``pid`` if it is alive and existed when a file naming it was written (else None)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE or process.create_time() > written_at + 1.0:
            return None
        return process
    except psutil.Error:
        return None


def running_supervisor(home: Path) -> int | None:
    """The pid of the ``hearth up`` running from ``home``, or None (a stale up.pid is removed)."""
    path = home / UP_PID
    try:
        pid, written_at = int(path.read_text().strip()), path.stat().st_mtime
    except (OSError, ValueError):
        return None
    if same_process(pid, written_at) is not None:
        return pid
    path.unlink(missing_ok=True)
    return None


def stop_orphans(home: Path, report: Callable[[str], None], grace_s: float = 20.0) -> list[str]:
    """Stop the parts a dead supervisor left running (see the module docstring); their names."""
    status = read_status(home)
    if status is None:
        return []
    written_at = status_path(home).stat().st_mtime
    if same_process(status.supervisor_pid, written_at) is not None:
        return []  # its supervisor lives: not orphans (the caller refuses to start a second stack)
    orphans = {}
    for part in status.parts:
        if part.pid is not None and (process := same_process(part.pid, written_at)) is not None:
            orphans[part.name] = process
    # In waves, as the supervisor stops them (part_order.py): a part's clean stop still finds what it
    # talks to. All at once, a device gateway waited 10 s for the broker stopping beside it.
    names = [part.name for part in status.parts]
    for wave in stop_waves(names, {part.name: part.depends_on for part in status.parts}):
        stopping = {name: orphans[name] for name in wave if name in orphans}
        for name, process in stopping.items():
            report(f"{name} (pid {process.pid}) was left running by an unclean stop; stopping it")
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in stopping.values():
            with contextlib.suppress(psutil.Error):
                process.wait(max(0.0, deadline - time.monotonic()))
            _signal_group(process.pid, signal.SIGKILL)  # whatever of its group outlived the grace period
    # A signal is delivered, not obeyed at once: a group member may still hold a port or Kafka's log-dir
    # lock for a moment after kill() returned. Stopped means gone, so ``hearth up`` can start right after.
    gone_by = time.monotonic() + KILL_WAIT_S
    while any(_living_members(process.pid) for process in orphans.values()) and time.monotonic() < gone_by:
        time.sleep(0.02)
    return list(orphans)


KILL_WAIT_S = 10.0  # how long a SIGKILLed group may take to be gone (seconds under heavy load)


def _living_members(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` that are not dead yet (zombies are dead)."""
    members = []
    for process in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error):
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(process.pid)
    return members


def clear_stale_postmaster_pid(data_dir: Path) -> bool:
    """Remove ``postmaster.pid`` if its pid is alive but is not a postgres of ``data_dir`` (pid reuse)."""
    path = data_dir / "postmaster.pid"
    try:
        lines = path.read_text().splitlines()
        pid, written_at = int(lines[0]), path.stat().st_mtime
    except (OSError, ValueError, IndexError):
        return False
    try:
        process = psutil.Process(pid)
        cmdline = process.cmdline()
        ours = process.name().startswith("postgres") and str(data_dir) in " ".join(cmdline)
        if ours and process.create_time() <= written_at + 1.0:
            return False  # a live postmaster of this data dir: not stale
    except psutil.NoSuchProcess:
        return False  # a dead pid: PostgreSQL clears that itself
    except psutil.Error:
        pass
    path.unlink(missing_ok=True)
    return True


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # each part leads its own process group (start_new_session)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


__all__ = ["UP_PID", "clear_stale_postmaster_pid", "running_supervisor", "same_process", "stop_orphans"]
