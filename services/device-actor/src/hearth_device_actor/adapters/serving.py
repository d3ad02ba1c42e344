"""Whether a device-actor worker serves: the file it keeps (``serving.json`` in its data directory) and
the check that reads it (``serving_problem``), which both ``python -m hearth_device_actor.probe``
(compose's health check) and ``hearth up``'s supervisor use.

Healthy means serving. A worker is healthy when it reads inbox partitions, or when it holds none only
because the other members of its faust group own every partition of the twins' changelog (an idle
spare: a 13th worker for 12 partitions). It is not healthy while it joins, while a rebalance is under
way, or while it holds nothing and some partition has no owner (faust once assigned a worker nothing
for good, see ``declare_changelog``: the group was Stable and nobody read the inbox).

Invariants and reasons:

* The worker says what it holds, in-process, where it is known for certain: ``held`` is written only
  once faust has recovered the twins' partitions *and* the inbox feed has caught them up with the
  journal and reads them (after ``InboxFeed.assign``); a revocation (a rebalance began) empties it at
  once. The file never claims a partition the worker does not read.
* The broker is asked only about a worker that holds nothing (the group's description: its state and
  every member's assignment, ``hearth_shared.adapters.probe.describe_group``): whether the others cover every
  partition is not the worker's knowledge. So the usual check is one small file read.
* The file names the process that wrote it (its pid and its start time in clock ticks since boot, from
  ``/proc``): a file a killed worker left is never taken for the health of its successor, even one with
  the same pid (a restarted container). It is rewritten every ``WRITE_EVERY_S``, and older than
  ``MAX_AGE_S`` it means a worker whose event loop is stuck: not healthy either.
* It is written atomically (a temporary file renamed over it): a reader never sees half of one.

It also carries the worker's inbox figures, for ``hearth status``: each lane's lag and how many state
reports were coalesced (the actor's overload metric, service/coalescing.py).
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import msgspec

from hearth_shared.adapters.probe import GroupView, describe_group

SERVING_FILE = "serving.json"
WRITE_EVERY_S = 1.0
MAX_AGE_S = 15.0
GROUP_TIMEOUT_S = 10.0

Phase = Literal["joining", "rebalancing", "serving"]


class Serving(msgspec.Struct, frozen=True, kw_only=True):
    """What the worker wrote: who it is, what it holds, where its group and changelog are."""

    version: int = 1
    pid: int
    started: int | None  # the process's start time (clock ticks since boot), None where /proc is missing
    written_at: float  # epoch seconds
    phase: Phase
    held: tuple[int, ...] = ()  # the twins' (and inbox) partitions it reads
    group: str  # faust's consumer group (the app id)
    changelog: str  # the twins' changelog topic
    partitions: int
    lag: dict[str, int] = {}  # per inbox lane: records its partitions here are behind their ends
    coalesced_reports: int = 0  # state reports folded into newer ones since the worker started
    late_reports: int = 0  # state reports that newer ones carried whole, or redelivered: no fact (actor.py)
    unknown_device_requests: int = 0  # requests for a device not registered: no fact (actor.py)


def serving_file(data_dir: str | Path) -> Path:
    """The worker's serving file, in its data directory (``HEARTH_DEVICE_ACTOR_DATA_DIR``)."""
    return Path(data_dir) / SERVING_FILE


def process_started(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat``, field 22);
    None if there is no such process or no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: count fields after its end
    return int(stat.rsplit(")", 1)[1].split()[19])


class ServingFile:
    """The worker's side: its phase and partitions, written on each change and every second."""

    def __init__(self, path: Path, *, group: str, changelog: str, partitions: int) -> None:
        self.path = path
        self.group, self.changelog, self.partitions = group, changelog, partitions
        self.phase: Phase = "joining"
        self.held: tuple[int, ...] = ()
        self.lag: dict[str, int] = {}  # set by the worker before each write (InboxFeed.lags)
        self.coalesced_reports = 0
        self.late_reports = 0
        self.unknown_device_requests = 0
        self._pid = os.getpid()
        self._started = process_started(self._pid)

    def rebalancing(self) -> None:
        self.phase, self.held = "rebalancing", ()
        self.write()

    def serve(self, partitions: set[int]) -> None:
        self.phase, self.held = "serving", tuple(sorted(partitions))
        self.write()

    def write(self) -> None:
        state = Serving(
            pid=self._pid,
            started=self._started,
            written_at=time.time(),
            phase=self.phase,
            held=self.held,
            group=self.group,
            changelog=self.changelog,
            partitions=self.partitions,
            lag=self.lag,
            coalesced_reports=self.coalesced_reports,
            late_reports=self.late_reports,
            unknown_device_requests=self.unknown_device_requests,
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.partial")
        partial.write_bytes(msgspec.json.encode(state))
        partial.replace(self.path)


def read_serving(path: Path) -> Serving | None:
    """The state in ``path``; None if there is none or it cannot be read."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=Serving)
    except (OSError, msgspec.DecodeError):
        return None


def own_problem(state: Serving | None, *, now: float, writer_alive: bool, max_age_s: float) -> str | None:
    """Why the worker that wrote ``state`` does not serve, as far as the file tells; None if it holds
    partitions or holds none after a completed rebalance (then ask ``spare_problem``)."""
    if state is None:
        return "no serving file yet (the worker is starting)"
    if not writer_alive:
        return f"the serving file is from process {state.pid}, which is gone"
    if (age := now - state.written_at) > max_age_s:
        return f"the worker last wrote its serving file {age:.0f} s ago (stuck?)"
    if state.phase == "joining":
        return "the worker is joining its group"
    if state.phase == "rebalancing":
        return "the worker's group is rebalancing (its partitions are being recovered)"
    return None


def spare_problem(state: Serving, group: GroupView) -> str | None:
    """For a worker that holds nothing: None while its group is Stable and its members own every
    partition of the changelog (it is a spare), else why it is not healthy."""
    if group.state != "Stable":
        return f"the worker holds no partitions and its group is {group.state or 'unknown to the broker'}"
    unowned = sorted(set(range(state.partitions)) - group.owned.get(state.changelog, frozenset()))
    if unowned:
        return f"the worker holds no partitions while partitions {unowned} of {state.changelog} have no owner"
    return None


def serving_problem(path: Path, bootstrap_servers: str, *, max_age_s: float = MAX_AGE_S) -> str | None:
    """None if the worker whose serving file is ``path`` serves (see the module docstring), else why not.
    Blocking; the broker is asked (in a thread of its own, so any caller may call this) only for a
    worker that holds nothing."""
    state = read_serving(path)
    alive = state is not None and writer_alive(state)
    problem = own_problem(state, now=time.time(), writer_alive=alive, max_age_s=max_age_s)
    if problem is not None or state is None or state.held:
        return problem

    async def described() -> GroupView:
        return await asyncio.wait_for(describe_group(bootstrap_servers, state.group), GROUP_TIMEOUT_S)

    try:
        with ThreadPoolExecutor(1) as pool:
            group = pool.submit(asyncio.run, described()).result()
    except Exception as error:  # the broker did not answer: whether the others cover everything is unknown
        return f"the worker holds no partitions and its group could not be described: {error!r}"
    return spare_problem(state, group)


def writer_alive(state: Serving) -> bool:
    """Whether the process that wrote ``state`` still runs (the same process, not one reusing its pid)."""
    if state.started is not None:
        return process_started(state.pid) == state.started
    try:  # no /proc where it was written: the pid alone
        os.kill(state.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
