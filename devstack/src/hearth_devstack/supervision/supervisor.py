"""Keeps the parts of the local stack running: restart with backoff, give up on a crash loop, report.

Invariants and reasons:

- A part that exits on its own (kill -9, a crash, the OOM killer) is *one part's* problem: it is
  reported (console and ``supervisor.log``) and restarted after a backoff that doubles per crash
  (``RestartPolicy``), the others keep running. A run that stayed up for ``stable_after_s`` resets the
  backoff, so a part that crashes once a day restarts at once every time.
- A part that crashes ``max_crashes`` times within ``window_s`` is in a crash loop: restarting it again
  would only hide the cause, so it is stopped for good (state ``failed``) with its log tail shown, and
  the rest of the stack keeps serving what it can.
- A part is (re)started only when every part it depends on is healthy (``depends_on``): a service
  that died while Kafka was down waits for Kafka instead of burning its crash budget. Time spent
  waiting is not a crash.
- The stack starts by the same rule: each part as soon as what it depends on is healthy, so parts with
  nothing between them start together (the servers, then the services all at once; a Kafka cluster's
  nodes, none of which answers before a quorum of them runs). Started one by one, a stack took the sum
  of its parts' start times (27 s here, the query API alone 7 s); together it takes its longest chain's.
  It stops the other way round (``part_order.stop_waves``): a part once every part depending on it has
  stopped, the parts of a wave at once.
- Each start is a fresh process from ``PartSpec.make`` (fresh health check, fresh log offset); before
  it, whatever is left of the previous run's process group is killed (e.g. uvicorn workers orphaned by
  a kill -9 of their parent would keep the port).
- A start that is not healthy within ``start_timeout_s`` counts as a crash; so does an exception of
  ``after_healthy`` (e.g. creating topics once Kafka answers).
- Nothing here sleeps or reads the wall clock directly: ``Clock`` and ``Child`` are seams, so the
  backoff and give-up policy is unit-tested with a fake clock and fake processes.
- The state is published through ``on_change`` (``hearth up`` writes the status file with it, see
  ``hearth_devstack.supervision.status``); ``snapshot()`` is safe to call from another thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

from hearth_devstack.supervision.part_order import stop_waves
from hearth_devstack.supervision.process import StartupError, stop_together, tail
from hearth_devstack.supervision.status import PartStatus

START_POLL_S = 0.1  # how often start_all looks at the parts starting (and at whose dependencies are up)


@dataclass(frozen=True)
class RestartPolicy:
    initial_backoff_s: float = 1.0
    factor: float = 2.0
    max_backoff_s: float = 30.0
    max_crashes: int = 5  # this many crashes within window_s: a crash loop, give up on the part
    window_s: float = 300.0
    stable_after_s: float = 60.0  # a run this long resets the backoff
    health_interval_s: float = 2.0  # how often a running part's health is probed
    start_timeout_factor: float = 1.0  # scales every part's start timeout (a machine known to be busy)


class Clock(Protocol):
    def now(self) -> float: ...  # monotonic seconds
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class Child(Protocol):
    """One run of a part: what the supervisor needs of a process (``ManagedProcess`` is one)."""

    name: str
    log_path: Path

    def start(self) -> None: ...
    def exit_code(self) -> int | None: ...  # None while it runs
    def is_healthy(self) -> bool: ...
    def kill_leftovers(self) -> None: ...  # SIGKILL what is left of its process group
    def stop(self) -> None: ...
    @property
    def pid(self) -> int | None: ...


@dataclass
class PartSpec:
    name: str
    make: Callable[[], Child]  # a new, not yet started process for each run
    start_timeout_s: float
    depends_on: Sequence[str] = ()
    after_healthy: Callable[[], None] | None = None  # run once per start, when it first answers
    url: str = ""
    reports: str = ""  # the directory its topic followers write their restart reports to ("": none)


@dataclass
class _Part:
    spec: PartSpec
    status: PartStatus
    child: Child | None = None
    started_at: float = 0.0
    retry_at: float = 0.0
    crashes: list[float] = field(default_factory=list)  # clock times of recent crashes
    backoff_s: float = 0.0
    checked_at: float = float("-inf")


class Supervisor:
    def __init__(
        self,
        specs: Sequence[PartSpec],
        *,
        policy: RestartPolicy | None = None,
        clock: Clock | None = None,
        report: Callable[[str], None] = print,
        on_change: Callable[[list[PartStatus]], None] | None = None,
    ) -> None:
        self.policy = policy or RestartPolicy()
        self.clock = clock or SystemClock()
        self.report = report
        self.on_change = on_change
        self._lock = threading.Lock()
        self._starting_up = False
        self._parts = {
            s.name: _Part(
                s, PartStatus(name=s.name, url=s.url, reports=s.reports, depends_on=list(s.depends_on))
            )
            for s in specs
        }
        unknown = {d for s in specs for d in s.depends_on} - set(self._parts)
        if unknown:
            raise ValueError(f"parts depend on unknown parts: {sorted(unknown)}")

    # -- starting and stopping the whole stack -------------------------------------------------------

    def start_all(self) -> None:
        """Start every part as soon as the parts it depends on are healthy (so parts with nothing between
        them start together) and return once every part is healthy; StartupError (all stopped) if one
        does not come up."""
        self._starting_up = True
        try:
            parts = list(self._parts.values())
            while any(part.status.state != "running" for part in parts):
                for part in parts:
                    if part.status.state == "pending" and self._dependencies_healthy(part):
                        self._launch(part)
                self.clock.sleep(START_POLL_S)
                for part in parts:
                    if part.status.state == "starting":
                        self._check_starting(part)
        except BaseException:
            self.stop_all()
            raise
        finally:
            self._starting_up = False

    def stop_all(self) -> None:
        """Stop every part once the parts that depend on it have stopped; the parts of a wave at once
        (``part_order.stop_waves``)."""
        names = list(self._parts)
        for wave in stop_waves(names, {name: part.spec.depends_on for name, part in self._parts.items()}):
            batch = [self._parts[name] for name in wave]
            running = [part for part in batch if part.child is not None]
            for part in running:
                self.report(f"stopping {part.spec.name} ...")
            stop_together([partial(_stop_child, part) for part in running])
            for part in batch:
                self._set(part, state="stopped", pid=None)

    # -- the supervision loop -------------------------------------------------------------------------

    def run(self, stop: threading.Event, interval_s: float = 0.25, busy_interval_s: float = 0.05) -> None:
        """Tick until ``stop``: every ``busy_interval_s`` while a part is starting or waiting to, so it is
        seen healthy (and its dependants started) within that much, and its ``healthy_after_s`` is
        measured to it (the restart bench judges sub-second restarts); else every ``interval_s``."""
        while not stop.is_set():
            self.tick()
            stop.wait(busy_interval_s if self._busy() else interval_s)

    def _busy(self) -> bool:
        return any(p.status.state in ("starting", "backoff", "waiting") for p in self._parts.values())

    def tick(self) -> None:
        """One pass over the parts: notice exits, finish starts, restart those whose backoff is over."""
        for part in self._parts.values():
            try:
                self._tick(part)
            except Exception as exc:  # one part's trouble must not end the supervision of the others
                self.report(f"supervising {part.spec.name} failed: {type(exc).__name__}: {exc}")
                part.retry_at = self.clock.now() + self.policy.max_backoff_s
                self._set(part, state="backoff", health="down", last_exit=f"supervisor error: {exc}")

    def _tick(self, part: _Part) -> None:
        state = part.status.state
        if state in ("starting", "running"):
            self._check_running(part)
        elif state in ("backoff", "waiting") and self.clock.now() >= part.retry_at:
            if self._dependencies_healthy(part):
                self._launch(part)
            elif state != "waiting":
                waiting_for = [d for d in part.spec.depends_on if not self._healthy(d)]
                self._set(part, state="waiting", note=f"waiting for {', '.join(waiting_for)}")

    def snapshot(self) -> list[PartStatus]:
        with self._lock:
            return [PartStatus(**vars(p.status)) for p in self._parts.values()]

    def child(self, name: str) -> Child | None:
        """The running process of a part (tests kill it)."""
        return self._parts[name].child

    # -- one part -------------------------------------------------------------------------------------

    def _launch(self, part: _Part) -> None:
        if part.child is not None:
            part.child.kill_leftovers()
        verb = "restarting" if part.status.restarts or part.status.last_exit is not None else "starting"
        if verb == "restarting":
            self._set(part, restarts=part.status.restarts + 1)
        self.report(f"{verb} {part.spec.name} ...")
        part.started_at = self.clock.now()
        try:
            part.child = part.spec.make()
            part.child.start()
        except Exception as exc:  # StartupError (e.g. its port is taken), or the OS refusing the process
            part.child = None
            self._crashed(part, f"could not start: {exc}")
            return
        log = str(part.child.log_path)
        self._set(part, state="starting", pid=part.child.pid, health="starting", note="", log=log)

    def _check_running(self, part: _Part) -> None:
        assert part.child is not None
        code = part.child.exit_code()
        if code is not None:
            self._crashed(part, _describe_exit(code))
        elif part.status.state == "starting":
            self._check_starting(part)
        elif self.clock.now() - part.checked_at >= self.policy.health_interval_s:
            part.checked_at = self.clock.now()
            health = "healthy" if self._probe(part.child) else "unhealthy"
            if health != part.status.health:
                self.report(f"{part.spec.name} is {health}")
                self._set(part, health=health)
            if self.clock.now() - part.started_at >= self.policy.stable_after_s:
                part.backoff_s = 0.0

    def _check_starting(self, part: _Part) -> None:
        assert part.child is not None
        code = part.child.exit_code()
        if code is not None:
            self._crashed(part, f"{_describe_exit(code)} while starting")
        elif self._probe(part.child):
            try:
                if part.spec.after_healthy is not None:
                    part.spec.after_healthy()
            except Exception as exc:
                part.child.stop()
                self._crashed(part, f"set-up after start failed: {exc}")
                return
            part.checked_at = self.clock.now()
            took = self.clock.now() - part.started_at
            self.report(f"{part.spec.name} is healthy ({took:.1f} s)")
            self._set(part, state="running", health="healthy", healthy_after_s=round(took, 2))
        elif self.clock.now() - part.started_at > (limit := self._start_timeout(part)):
            part.child.stop()
            why = f"not healthy within {limit:.0f} s"
            self._crashed(part, why)

    def _crashed(self, part: _Part, why: str) -> None:
        now = self.clock.now()
        log = part.child.log_path if part.child is not None else None
        if part.child is not None:
            part.child.kill_leftovers()
        if self._starting_up:  # `hearth up` cannot come up: say so at once, as before there was a supervisor
            self._set(part, state="failed", health="down", last_exit=why, pid=None)
            last = tail(log) if log is not None else "(no log)"
            raise StartupError(f"{part.spec.name}: {why}. Last lines of {log}:\n{last}")
        window = self.policy.window_s
        part.crashes = [t for t in part.crashes if now - t < window] + [now]
        if len(part.crashes) >= self.policy.max_crashes:
            self._set(part, state="failed", health="down", last_exit=why, pid=None, note="gave up")
            self.report(
                f"{part.spec.name} {why}; it crashed {len(part.crashes)} times within {window:.0f} s, "
                f"so it stays stopped (the rest keeps running). Last lines of {log}:\n"
                + (tail(log) if log is not None else "(no log)")
            )
            return
        policy = self.policy
        part.backoff_s = min(policy.max_backoff_s, part.backoff_s * policy.factor or policy.initial_backoff_s)
        part.retry_at = now + part.backoff_s
        self.report(f"{part.spec.name} {why}; restarting in {part.backoff_s:.1f} s (log: {log})")
        self._set(part, state="backoff", health="down", last_exit=why, pid=None, note="")

    # -- helpers --------------------------------------------------------------------------------------

    def _start_timeout(self, part: _Part) -> float:
        return part.spec.start_timeout_s * self.policy.start_timeout_factor

    def _probe(self, child: Child) -> bool:
        try:
            return child.is_healthy()
        except Exception:
            return False

    def _healthy(self, name: str) -> bool:
        status = self._parts[name].status
        return status.state == "running" and status.health == "healthy"

    def _dependencies_healthy(self, part: _Part) -> bool:
        return all(self._healthy(d) for d in part.spec.depends_on)

    def _set(self, part: _Part, **changes: object) -> None:
        with self._lock:
            for key, value in changes.items():
                setattr(part.status, key, value)
        if self.on_change is not None:
            self.on_change(self.snapshot())


def _stop_child(part: _Part) -> None:
    assert part.child is not None
    part.child.stop()
    part.child.kill_leftovers()


def _describe_exit(code: int) -> str:
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


__all__ = ["Child", "Clock", "PartSpec", "RestartPolicy", "Supervisor", "SystemClock"]
