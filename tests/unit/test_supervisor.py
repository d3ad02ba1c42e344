"""The supervisor's policy with a fake clock and fake processes: backoff, give-up, dependencies, startup."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

import pytest

from hearth_devstack.supervision.process import StartupError, stop_together
from hearth_devstack.supervision.status import PartStatus
from hearth_devstack.supervision.supervisor import PartSpec, RestartPolicy, Supervisor

pytestmark = pytest.mark.unit

POLICY = RestartPolicy(
    initial_backoff_s=1, factor=2, max_backoff_s=8, max_crashes=4, window_s=100, stable_after_s=50,
    health_interval_s=1,
)  # fmt: skip


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


class FakeProcess:
    """One run of a part; the test decides when it answers its health check and when it dies."""

    pids = iter(range(1000, 100000))

    def __init__(self, name: str, log: Path, *, healthy: bool = True) -> None:
        self.name, self.log_path = name, log
        self.code: int | None = None
        self.answers = healthy
        self.started = self.stopped = self.leftovers_killed = False
        self._pid = next(self.pids)

    @property
    def pid(self) -> int | None:
        return self._pid

    def start(self) -> None:
        self.started = True

    def exit_code(self) -> int | None:
        return self.code

    def is_healthy(self) -> bool:
        return self.answers and self.code is None

    def kill_leftovers(self) -> None:
        self.leftovers_killed = True

    def stop(self) -> None:
        self.stopped = True
        self.code = self.code if self.code is not None else -15


class Fleet:
    """Fake parts by name; every run of a part is recorded, the last one is ``current(name)``."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.runs: dict[str, list[FakeProcess]] = {}
        self.healthy_on_start: dict[str, bool] = {}

    def spec(self, name: str, *deps: str, timeout_s: float = 10) -> PartSpec:
        def make() -> FakeProcess:
            log = self.tmp_path / f"{name}.log"
            log.write_text(f"{name} line 1\n{name} says why it died\n")
            run = FakeProcess(name, log, healthy=self.healthy_on_start.get(name, True))
            self.runs.setdefault(name, []).append(run)
            return run

        return PartSpec(name, make, timeout_s, depends_on=deps)

    def current(self, name: str) -> FakeProcess:
        return self.runs[name][-1]


def supervised(tmp_path: Path, *names: tuple[str, ...]) -> tuple[Supervisor, Fleet, FakeClock, list[str]]:
    fleet, clock, lines = Fleet(tmp_path), FakeClock(), list[str]()
    specs = [fleet.spec(name, *deps) for name, *deps in names]
    supervisor = Supervisor(specs, policy=POLICY, clock=clock, report=lines.append)
    supervisor.start_all()
    return supervisor, fleet, clock, lines


def state(supervisor: Supervisor, name: str) -> PartStatus:
    return next(p for p in supervisor.snapshot() if p.name == name)


def run_for(supervisor: Supervisor, clock: FakeClock, seconds: float, step: float = 0.25) -> None:
    end = clock.t + seconds
    while clock.t < end:
        supervisor.tick()
        clock.sleep(step)


def test_a_killed_part_is_restarted_alone_and_reported(tmp_path: Path) -> None:
    supervisor, fleet, clock, lines = supervised(tmp_path, ("kafka",), ("actor", "kafka"), ("api", "kafka"))
    first = fleet.current("actor")
    first.code = -9
    supervisor.tick()
    assert state(supervisor, "actor").state == "backoff"
    assert state(supervisor, "actor").last_exit == "was killed by signal 9"
    assert first.leftovers_killed  # orphans of the dead run are killed before anything restarts
    assert any("actor was killed by signal 9; restarting in 1.0 s" in line for line in lines)
    run_for(supervisor, clock, 1.5)
    assert fleet.current("actor") is not first
    actor = state(supervisor, "actor")
    assert (actor.state, actor.health, actor.restarts) == ("running", "healthy", 1)
    assert len(fleet.runs["api"]) == 1 and len(fleet.runs["kafka"]) == 1  # the others ran on


def test_backoff_doubles_up_to_the_cap_and_a_crash_loop_is_given_up(tmp_path: Path) -> None:
    supervisor, fleet, clock, lines = supervised(tmp_path, ("kafka",), ("actor", "kafka"))
    delays = []
    for _ in range(POLICY.max_crashes - 1):
        fleet.current("actor").code = 1
        supervisor.tick()
        crashed_at = clock.t
        runs = len(fleet.runs["actor"])
        while len(fleet.runs["actor"]) == runs:
            clock.sleep(0.25)
            supervisor.tick()
        delays.append(clock.t - crashed_at)
        run_for(supervisor, clock, 0.5)  # healthy again, but not for stable_after_s
    assert delays == pytest.approx([1, 2, 4], abs=0.26)
    fleet.current("actor").code = 1
    supervisor.tick()
    actor = state(supervisor, "actor")
    assert (actor.state, actor.health, actor.note) == ("failed", "down", "gave up")
    assert "actor says why it died" in lines[-1]  # the log tail is shown
    run_for(supervisor, clock, 60)
    assert len(fleet.runs["actor"]) == POLICY.max_crashes  # never started again
    assert state(supervisor, "kafka").state == "running"  # the rest keeps running


def test_crashes_outside_the_window_are_forgotten_and_a_stable_run_resets_the_backoff(
    tmp_path: Path,
) -> None:
    supervisor, fleet, clock, _ = supervised(tmp_path, ("actor",))
    for _ in range(POLICY.max_crashes * 2):  # twice the budget, but spread out over time
        fleet.current("actor").code = 1
        supervisor.tick()
        assert state(supervisor, "actor").state == "backoff"
        run_for(supervisor, clock, 1.5)  # the first delay (1 s) only: the backoff was reset meanwhile
        assert state(supervisor, "actor").state == "running"
        run_for(supervisor, clock, POLICY.window_s / POLICY.max_crashes + POLICY.stable_after_s)
    assert state(supervisor, "actor").restarts == POLICY.max_crashes * 2


def test_a_part_restarts_only_once_what_it_depends_on_is_healthy(tmp_path: Path) -> None:
    supervisor, fleet, clock, _ = supervised(tmp_path, ("kafka",), ("actor", "kafka"))
    fleet.healthy_on_start["kafka"] = False  # the broker's next run takes a while to answer
    fleet.current("kafka").code = -9
    fleet.current("actor").code = 1  # died with it
    run_for(supervisor, clock, 5)
    assert state(supervisor, "kafka").state == "starting"
    assert state(supervisor, "actor").state == "waiting"
    assert "kafka" in state(supervisor, "actor").note
    assert len(fleet.runs["actor"]) == 1  # no start against a broker that is not there
    fleet.current("kafka").answers = True
    run_for(supervisor, clock, 1)
    assert state(supervisor, "kafka").health == "healthy"
    assert state(supervisor, "actor").state == "running"
    assert len(fleet.runs["actor"]) == 2


def test_a_restart_that_never_becomes_healthy_counts_as_a_crash(tmp_path: Path) -> None:
    supervisor, fleet, clock, _ = supervised(tmp_path, ("api",))
    fleet.healthy_on_start["api"] = False
    fleet.current("api").code = -9
    run_for(supervisor, clock, 12)  # 1 s backoff + 10 s start timeout
    hung = fleet.runs["api"][1]
    assert hung.stopped
    api = state(supervisor, "api")
    assert (api.state, api.last_exit) == ("backoff", "not healthy within 10 s")


def test_a_failing_start_stops_what_started_and_names_the_part(tmp_path: Path) -> None:
    fleet, clock = Fleet(tmp_path), FakeClock()
    fleet.healthy_on_start["postgres"] = False
    supervisor = Supervisor(
        [fleet.spec("kafka"), fleet.spec("postgres", timeout_s=3)], policy=POLICY, clock=clock, report=print
    )
    with pytest.raises(StartupError, match="postgres: not healthy within 3 s") as raised:
        supervisor.start_all()
    assert "postgres says why it died" in str(raised.value)
    assert fleet.current("kafka").stopped
    assert [p.state for p in supervisor.snapshot()] == ["stopped", "stopped"]


def test_unhealthy_is_reported_without_a_restart(tmp_path: Path) -> None:
    supervisor, fleet, clock, lines = supervised(tmp_path, ("query-api",))
    fleet.current("query-api").answers = False
    run_for(supervisor, clock, 2)
    assert state(supervisor, "query-api").health == "unhealthy"
    assert "query-api is unhealthy" in lines
    assert len(fleet.runs["query-api"]) == 1


def test_a_start_that_raises_is_a_crash_and_supervision_goes_on(tmp_path: Path) -> None:
    fleet, clock, lines = Fleet(tmp_path), FakeClock(), list[str]()
    spec = fleet.spec("redis")
    broken = {"on": False}

    def make() -> FakeProcess:
        if broken["on"]:
            raise OSError("port 6379 is taken")
        return spec.make()  # type: ignore[return-value]

    supervisor = Supervisor(
        [PartSpec("redis", make, 10), fleet.spec("api")], policy=POLICY, clock=clock, report=lines.append
    )
    supervisor.start_all()
    broken["on"] = True
    fleet.current("redis").code = -9
    run_for(supervisor, clock, 2)
    redis = state(supervisor, "redis")
    assert (redis.state, redis.last_exit) == ("backoff", "could not start: port 6379 is taken")
    broken["on"] = False
    run_for(supervisor, clock, 5)
    assert state(supervisor, "redis").state == "running"
    assert state(supervisor, "api").state == "running"


class QuorumNode(FakeProcess):
    """A cluster node: healthy only once every node of its cluster runs (none answers alone)."""

    def __init__(self, name: str, log: Path, cluster: list[QuorumNode]) -> None:
        super().__init__(name, log)
        self.cluster = cluster

    def is_healthy(self) -> bool:
        return self.code is None and len(self.cluster) == 2 and all(n.started for n in self.cluster)


def quorum_node(tmp_path: Path, cluster: list[QuorumNode], name: str) -> PartSpec:
    def make() -> QuorumNode:
        run = QuorumNode(name, tmp_path / f"{name}.log", cluster)
        cluster.append(run)
        return run

    return PartSpec(name, make, 10)


def test_parts_with_nothing_between_them_start_together_and_stop_together(tmp_path: Path) -> None:
    cluster: list[QuorumNode] = []
    lines: list[str] = []
    brokers = ["kafka-1", "kafka-2"]
    api = PartSpec("api", lambda: FakeProcess("api", tmp_path / "api.log"), 10, depends_on=brokers)
    nodes = [quorum_node(tmp_path, cluster, name) for name in brokers]
    supervisor = Supervisor([*nodes, api], policy=POLICY, clock=FakeClock(), report=lines.append)
    supervisor.start_all()  # one by one, kafka-1 would wait for a quorum that never comes
    assert [p.state for p in supervisor.snapshot()] == ["running", "running", "running"]
    healthy = [next(i for i, line in enumerate(lines) if line.startswith(f"{b} is healthy")) for b in brokers]
    assert lines.index("starting kafka-2 ...") < healthy[0]
    assert lines.index("starting api ...") > max(healthy)  # not before what it depends on
    supervisor.stop_all()
    assert all(n.stopped for n in cluster)
    assert lines[-3:] == ["stopping api ...", "stopping kafka-2 ...", "stopping kafka-1 ..."]


class OrderedProcess(FakeProcess):
    """A part that notes in a shared list when it was stopped."""

    def __init__(self, name: str, log: Path, stops: list[str]) -> None:
        super().__init__(name, log)
        self.stops = stops

    def stop(self) -> None:
        self.stops.append(self.name)
        super().stop()


def test_the_stack_starts_by_its_dependencies_and_stops_each_part_after_its_dependants(
    tmp_path: Path,
) -> None:
    stops: list[str] = []
    parts: dict[str, tuple[str, ...]] = {
        "kafka": (), "postgres": (), "actor": ("kafka",), "projector": ("kafka", "postgres"),
        "gateway": ("kafka",), "simulator": ("gateway",),
    }  # fmt: skip

    def spec(name: str, deps: tuple[str, ...]) -> PartSpec:
        return PartSpec(
            name, lambda: OrderedProcess(name, tmp_path / f"{name}.log", stops), 10, depends_on=deps
        )

    lines: list[str] = []
    supervisor = Supervisor(
        [spec(name, deps) for name, deps in parts.items()],
        policy=POLICY,
        clock=FakeClock(),
        report=lines.append,
    )
    supervisor.start_all()
    started = [
        line.removeprefix("starting ").removesuffix(" ...") for line in lines if line.startswith("start")
    ]
    assert set(started[:2]) == {"kafka", "postgres"}  # the servers first, together
    assert started.index("simulator") > started.index("gateway")
    supervisor.stop_all()
    assert set(stops[:3]) == {"simulator", "projector", "actor"}  # nothing depends on these
    assert set(stops[3:5]) == {"gateway", "postgres"}  # what only they depended on
    assert stops[5:] == ["kafka"]


def test_stops_called_together_overlap_and_each_runs_once() -> None:
    """``stop_together`` (a supervisor's wave, ``services_running``'s end): every stop runs at once, so
    their graceful ends overlap and take the slowest one's time, not the sum. Each stop here waits at a
    barrier for all three: called one after another, the first would wait alone and break it."""
    met = threading.Barrier(3, timeout=10)
    stopped: list[str] = []

    def stop(name: str) -> None:
        met.wait()
        stopped.append(name)

    stop_together([partial(stop, name) for name in ("projector", "command-api", "query-api")])
    assert sorted(stopped) == ["command-api", "projector", "query-api"]
    stop_together([])  # nothing to stop: no pool, no error
