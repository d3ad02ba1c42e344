"""The device actor's health rules (hearth_device_actor.adapters.serving) on written files and group views: a
worker is healthy while it reads partitions, or holds none while the others own every partition; not
while it joins or rebalances, holds nothing while a partition has no owner, or when its file is stale or
another (dead) process's. The same rules on the real broker and real workers:
tests/integration/test_actor_serving.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from hearth_device_actor.adapters.serving import (
    Serving,
    ServingFile,
    own_problem,
    process_started,
    read_serving,
    serving_file,
    serving_problem,
    spare_problem,
    writer_alive,
)
from hearth_shared.adapters.probe import GroupView

pytestmark = pytest.mark.unit

CHANGELOG = "hearth-device-actor-t-twins-changelog"


def state(phase: str = "serving", held: tuple[int, ...] = (), *, written_at: float = 1000.0) -> Serving:
    return Serving(
        pid=os.getpid(),
        started=process_started(os.getpid()),
        written_at=written_at,
        phase=phase,  # type: ignore[arg-type]
        held=held,
        group="hearth-device-actor-t",
        changelog=CHANGELOG,
        partitions=12,
    )


def problem(s: Serving | None, *, alive: bool = True, now: float = 1001.0) -> str | None:
    return own_problem(s, now=now, writer_alive=alive, max_age_s=15.0)


def test_a_worker_reading_partitions_serves_and_one_joining_or_rebalancing_does_not() -> None:
    assert problem(state(held=(0, 1, 2))) is None
    assert "joining" in (problem(state("joining")) or "")
    assert "rebalancing" in (problem(state("rebalancing")) or "")
    assert "starting" in (problem(None) or "")


def test_a_stale_file_or_one_of_a_dead_process_is_not_healthy() -> None:
    assert "gone" in (problem(state(held=(0,)), alive=False) or "")
    assert "16 s ago" in (problem(state(held=(0,)), now=1016.0) or "")


def test_a_worker_holding_nothing_serves_only_while_the_others_own_every_partition() -> None:
    idle = state(held=())
    assert problem(idle) is None  # the file alone cannot tell: the group is asked
    everything = frozenset(range(12))
    assert spare_problem(idle, GroupView("Stable", 12, {CHANGELOG: everything})) is None
    unowned = spare_problem(idle, GroupView("Stable", 2, {CHANGELOG: everything - {3, 7}}))
    assert unowned is not None and "[3, 7]" in unowned
    other_topic = spare_problem(idle, GroupView("Stable", 2, {"another-changelog": everything}))
    assert other_topic is not None and "[0, 1," in other_topic
    for rebalancing in ("PreparingRebalance", "CompletingRebalance", "Empty", ""):
        said = spare_problem(idle, GroupView(rebalancing, 2, {CHANGELOG: everything}))
        assert said is not None and "holds no partitions" in said


def test_the_file_round_trips_and_names_its_writer(tmp_path: Path) -> None:
    path = serving_file(tmp_path / "device-actor")
    mine = ServingFile(path, group="g", changelog=CHANGELOG, partitions=12)
    mine.write()
    written = read_serving(path)
    assert written is not None and written.phase == "joining" and writer_alive(written)
    mine.serve({5, 1})
    written = read_serving(path)
    assert written is not None and (written.phase, written.held) == ("serving", (1, 5))
    assert serving_problem(path, "127.0.0.1:1") is None  # it holds partitions: no broker asked
    mine.rebalancing()
    assert (
        serving_problem(path, "127.0.0.1:1")
        == "the worker's group is rebalancing (its partitions are being recovered)"
    )


def test_a_file_left_by_a_dead_worker_or_one_whose_pid_was_reused_is_not_its_successors(
    tmp_path: Path,
) -> None:
    path = serving_file(tmp_path)
    code = (
        "import sys; from pathlib import Path; from hearth_device_actor.adapters.serving import ServingFile; "
        "ServingFile(Path(sys.argv[1]), group='g', changelog='c', partitions=12).serve({0, 1})"
    )  # a worker that wrote its file, then ended
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)
    left = read_serving(path)
    assert left is not None and left.held == (0, 1) and time.time() - left.written_at < 60
    assert not writer_alive(left)
    problem_now = serving_problem(path, "127.0.0.1:1")
    assert problem_now is not None and "gone" in problem_now
    reused = msgspec.structs.replace(left, pid=os.getpid())  # this pid, but not the process that wrote it
    assert not writer_alive(reused)
