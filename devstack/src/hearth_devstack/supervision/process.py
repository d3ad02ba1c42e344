"""A supervised server process: started in its own process group, logged to a file, health-checked.

Every part of the local stack (Kafka, PostgreSQL, Redis, the services, the simulator) is one
``ManagedProcess``. The launchers for each part build the command line and the health check; this
module does the rest the same way for all of them.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path


class StartupError(RuntimeError):
    """A part of the stack did not come up; the message says which and why, with its log's tail."""


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log written)"


@dataclass
class ManagedProcess:
    """One child process of the stack."""

    name: str
    argv: Sequence[str]
    log_path: Path
    healthy: Callable[[], bool]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    user: str | None = None  # run as this (unprivileged) user, e.g. for PostgreSQL
    stop_signal: int = signal.SIGTERM
    stop_timeout_s: float = 20.0
    url: str = ""
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it from here
        # As root, switch to the unprivileged user in the child itself (not with `runuser`): the pid we
        # hold is then the server's own, so a kill -9 of it is seen as its exit, and nothing sits between.
        account = pwd.getpwnam(self.user) if self.user and os.geteuid() == 0 else None
        self.proc = subprocess.Popen(
            list(self.argv),
            user=account.pw_uid if account else None,
            group=account.pw_gid if account else None,
            extra_groups=[] if account else None,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.cwd,
            env={**os.environ, **self.env},
            start_new_session=True,  # its own process group: Ctrl-C reaches us, and we stop it
        )
        log.close()

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise StartupError(
                    f"{self.name} exited with code {self.proc.returncode} while starting. "
                    f"Last lines of {self.log_path}:\n{tail(self.log_path)}"
                )
            try:
                if self.healthy():
                    return
            except Exception:
                pass
            time.sleep(0.2)
        raise StartupError(
            f"{self.name} did not become healthy within {timeout_s:.0f} s. "
            f"Last lines of {self.log_path}:\n{tail(self.log_path)}"
        )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- what the supervisor (hearth_devstack.supervision.supervisor.Child) asks of a process --

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def exit_code(self) -> int | None:
        """None while it runs; its exit code (negative: the signal that killed it) once it has ended."""
        return self.proc.poll() if self.proc is not None else None

    def is_healthy(self) -> bool:
        return self.healthy()

    def kill_leftovers(self) -> None:
        """SIGKILL whatever is left in its process group (children a killed parent left behind)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait(5)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, self.stop_signal)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def stop_together(stops: Sequence[Callable[[], None]]) -> None:
    """Call every stop at once, each in a thread of its own, and return when all have: parts whose graceful
    ends do not wait on each other stop in the slowest one's time, not the sum of theirs (a wave of the
    supervisor's, ``services_running``'s services: they share only the servers, which stay up meanwhile)."""
    if stops:
        with ThreadPoolExecutor(max_workers=len(stops)) as pool:
            list(pool.map(lambda stop: stop(), stops))
