"""Healthy means serving, for device-actor workers on the real broker: the check ``hearth up``'s
supervisor and compose's probe use (``hearth_device_actor.adapters.serving.serving_problem`` through
``Services.part``) says healthy only once a worker reads the inbox partitions whose twins it holds, not
while it joins or while its group rebalances; a worker that holds nothing is healthy only while the
group's members own every partition of the twins' changelog (the group's description, decoded from the
broker). The rules on made-up files and group views: tests/unit/test_actor_serving.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from hearth_device_actor.adapters.serving import ServingFile, read_serving, serving_file, serving_problem
from hearth_devstack.local import Services
from hearth_devstack.supervision.process import ManagedProcess
from hearth_shared.adapters.probe import describe_group
from hearth_shared.adapters.settings import StackSettings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = 6  # a killed worker's partitions move once its session times out


def worker(
    settings: StackSettings,
    tmp_path: Path,
    name: str,
    *,
    wait: bool = True,
    env: dict[str, str] | None = None,
) -> ManagedProcess:
    services = Services(
        settings,
        logs=tmp_path / name,
        data=tmp_path / f"{name}-data",
        extra_env={"HEARTH_DEVICE_ACTOR_SESSION_TIMEOUT_S": str(SESSION_TIMEOUT_S), **(env or {})},
    )
    part, timeout_s = services.part("device-actor")
    part.start()
    if wait:
        part.wait_healthy(timeout_s)
    return part


def held(tmp_path: Path, name: str) -> set[int]:
    state = read_serving(serving_file(tmp_path / f"{name}-data" / "device-actor"))
    return set(state.held) if state is not None and state.phase == "serving" else set()


def kill(part: ManagedProcess) -> None:
    assert part.proc is not None
    os.killpg(part.proc.pid, signal.SIGKILL)  # no goodbye: the group learns of it by its session timeout
    part.proc.wait(10)


async def test_a_worker_serves_once_it_reads_partitions_and_a_spare_only_while_they_are_all_owned(
    stack: StackSettings, tmp_path: Path
) -> None:
    first = worker(stack, tmp_path, "w0", wait=False)
    try:
        assert not first.is_healthy()  # started, not serving yet
        first.wait_healthy(90)
        assert held(tmp_path, "w0") == set(range(12))
        # A 13th worker would hold nothing; its file is written here (13 processes are too many for the
        # machine), and the check asks the broker whether the group owns every partition without it.
        written = read_serving(serving_file(tmp_path / "w0-data" / "device-actor"))
        assert written is not None
        spare_path = serving_file(tmp_path / "spare")
        spare = ServingFile(spare_path, group=written.group, changelog=written.changelog, partitions=12)
        spare.serve(set())
        assert serving_problem(spare_path, stack.kafka_bootstrap_servers) is None
        kill(first)
        spare.write()  # as its heartbeat does

        async def unowned() -> bool:
            spare.write()
            problem = serving_problem(spare_path, stack.kafka_bootstrap_servers)
            return problem is not None and "holds no partitions" in problem

        await eventually(unowned, "the spare not healthy once the only owner's session ended", timeout_s=60)
    finally:
        first.stop()


async def test_a_rebalance_makes_a_serving_worker_unhealthy_until_it_reads_its_new_share(
    stack: StackSettings, tmp_path: Path
) -> None:
    parts = [worker(stack, tmp_path, "w0"), worker(stack, tmp_path, "w1")]
    try:

        def shared(*names: str) -> bool:
            shares = [held(tmp_path, name) for name in names]
            return all(shares) and sum(map(len, shares)) == 12 and set().union(*shares) == set(range(12))

        await eventually(lambda: shared("w0", "w1"), "w0 and w1 sharing the 12 partitions", timeout_s=60)
        assert parts[0].is_healthy() and parts[1].is_healthy()
        kill(parts[1])
        parts.append(worker(stack, tmp_path, "w2", wait=False))  # joins while w1 is still a member
        path = serving_file(tmp_path / "w0-data" / "device-actor")
        problems: list[str] = []

        def w0_rebalancing() -> bool:
            problem = serving_problem(path, stack.kafka_bootstrap_servers)
            problems.extend([problem] if problem else [])
            return problem is not None

        await eventually(w0_rebalancing, "w0 reported not healthy during the rebalance", timeout_s=60)
        assert any("rebalancing" in p for p in problems), problems
        parts[2].wait_healthy(90)
        await eventually(lambda: shared("w0", "w2"), "w0 and w2 sharing the 12 partitions", timeout_s=60)
        assert parts[0].is_healthy()
    finally:
        for part in parts:
            part.stop()


async def test_a_worker_stays_in_its_group_long_after_its_max_poll_interval(
    stack: StackSettings, tmp_path: Path
) -> None:
    """faust's consumer has no agent and never fetches by itself; aiokafka leaves the group of a consumer
    that has not fetched for ``max_poll_interval``, silently, and faust never rejoins (the worker's file
    still says it serves). ``keep_fetching`` fetches nothing every fifth of the interval: after three
    intervals the worker is still the group's one member, owning every partition."""
    interval_s = 4.0
    part = worker(stack, tmp_path, "idle", env={"HEARTH_DEVICE_ACTOR_MAX_POLL_INTERVAL_S": str(interval_s)})
    try:
        state = read_serving(serving_file(tmp_path / "idle-data" / "device-actor"))
        assert state is not None and set(state.held) == set(range(12))
        await asyncio.sleep(3 * interval_s)  # time passing is what is tested: no condition to wait for
        group = await describe_group(stack.kafka_bootstrap_servers, state.group)
        assert (group.state, group.members) == ("Stable", 1), group
        assert group.owned.get(state.changelog) == frozenset(range(12)), group
    finally:
        part.stop()
