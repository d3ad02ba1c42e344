"""Server start-up written once (hearth_devstack.launch.server_startup): ``hearth up``'s supervised server
parts are the start-ups the tests and benches run, and a start whose after-start step fails leaves no
process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hearth_devstack.launch.server_startup import (
    KAFKA_STARTUP_S,
    MOSQUITTO_STARTUP_S,
    POSTGRES_STARTUP_S,
    REDIS_STARTUP_S,
    ServerStartup,
    start_once,
)
from hearth_devstack.local import LocalStack
from hearth_devstack.supervision.process import ManagedProcess

pytestmark = pytest.mark.unit


def test_the_local_stack_supervises_the_shared_server_start_ups(tmp_path: Path) -> None:
    stack = LocalStack(home=tmp_path, simulate=False, analytics=False)
    parts = {spec.name: spec for spec in stack.part_specs()}
    expected = {
        "kafka": (KAFKA_STARTUP_S, stack.kafka.bootstrap),
        "mosquitto": (MOSQUITTO_STARTUP_S, stack.mosquitto.url),
        "postgres": (POSTGRES_STARTUP_S, stack.postgres.dsn),
        "redis": (REDIS_STARTUP_S, stack.redis.url),
    }
    assert {name: (parts[name].start_timeout_s, parts[name].url) for name in expected} == expected
    assert parts["postgres"].after_healthy == stack.postgres.ensure_database
    assert parts["kafka"].after_healthy is not None  # the local stack's own step: its topics
    assert stack.postgres.data_dir == (tmp_path / "data" / "postgres").resolve()  # its own place


def test_a_failing_after_start_step_stops_the_server(tmp_path: Path) -> None:
    made: list[ManagedProcess] = []

    def make() -> ManagedProcess:
        process = ManagedProcess(
            name="sleeper",
            argv=[sys.executable, "-c", "import time; time.sleep(60)"],
            log_path=tmp_path / "sleeper.log",
            healthy=lambda: True,
            stop_timeout_s=5.0,
        )
        made.append(process)
        return process

    def fail() -> None:
        raise RuntimeError("no database")

    with pytest.raises(RuntimeError, match="no database"):
        start_once(ServerStartup("sleeper", None, make, 10.0, "", after_healthy=fail))
    (process,) = made
    assert process.proc is not None and process.proc.poll() is not None  # started, then stopped
