"""A supervised part killed with -9, and the check that the supervisor has brought it back: what the chaos
tests, the restart bench's kills and the scale-out drill mean by "killed" and "healthy again".

Killed is SIGKILL to the part's main process, as ``kill -9 <pid>`` (its children, e.g. uvicorn's workers,
are the supervisor's to clear when it restarts it). Healthy again is the supervisor's own view: a restart
counted after the kill, running, its health check passing (the checks ``hearth status`` shows). A part the
supervisor gave up on can never come back, so the check raises instead of letting a wait run out.
There is no wait loop here: the tests wait with their ``eventually``, the benches with theirs.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from hearth_devstack.supervision.status import PartStatus
from hearth_devstack.supervision.supervisor import Supervisor


class GaveUp(AssertionError):
    """The supervisor stopped restarting the part (a crash loop): it will not be healthy again."""


@dataclass(frozen=True)
class Kill:
    """One kill: the part, the pid killed, its restarts before, when (monotonic and UTC wall clock)."""

    part: str
    pid: int
    restarts_before: int
    at: float
    wall: str


def part_status(supervisor: Supervisor, name: str) -> PartStatus:
    return next(p for p in supervisor.snapshot() if p.name == name)


def kill_part(supervisor: Supervisor, name: str) -> Kill:
    """SIGKILL the part's running process."""
    restarts = part_status(supervisor, name).restarts
    victim = supervisor.child(name)
    assert victim is not None and victim.pid is not None, f"{name} is not running"
    kill = Kill(name, victim.pid, restarts, time.monotonic(), time.strftime("%H:%M:%S", time.gmtime()))
    os.kill(victim.pid, signal.SIGKILL)
    return kill


def healthy_again(supervisor: Supervisor, kill: Kill) -> bool:
    """Whether the supervisor has the killed part running and healthy again (raises ``GaveUp`` if it
    stopped restarting it)."""
    part = part_status(supervisor, kill.part)
    if part.state == "failed":
        raise GaveUp(f"the supervisor gave up on {kill.part}: {part.last_exit}")
    return part.restarts > kill.restarts_before and part.state == "running" and part.health == "healthy"
