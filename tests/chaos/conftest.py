"""The chaos suite's stack: Kafka, PostgreSQL, Redis and the services under the supervisor of
``hearth up`` (``LocalStack``), on free ports in a temporary directory, supervised by a background thread
for the module's tests. It starts as ``hearth up`` does, each part once what it needs is healthy: 13 s for
the kill-parts stack, where one part after another took 28 s."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hearth_devstack.local import LocalStack, StackPorts
from hearth_devstack.supervision.supervisor import RestartPolicy

# Quicker than `hearth up`'s default so a kill costs the suite seconds; three times the start timeouts,
# since the suite runs beside other tests on a shared machine (a query API took 48 s to start at load 14).
CHAOS_POLICY = RestartPolicy(
    initial_backoff_s=0.5, max_backoff_s=5.0, max_crashes=6, window_s=120.0, start_timeout_factor=3.0
)


@contextmanager
def supervised(
    home: Path,
    service_env: dict[str, str] | None = None,
    *,
    simulate: bool = False,
    mqtt_brokers: int = 1,
    device_actors: int = 1,
    query_apis: int = 1,
) -> Iterator[LocalStack]:
    """A ``LocalStack`` on free ports under ``home``, supervised by a background thread until the block
    ends; ``service_env`` goes to every service besides the chaos suite's own; ``simulate``: with the
    simulator (it plays the devices registered as simulated); how many MQTT shards, actor workers and
    query-API processes (LocalStack's fields)."""
    stack = LocalStack(
        home=home,
        ports=StackPorts.free(room=3),  # never the defaults; room for a second MQTT shard and query API
        topic_prefix="chaos",
        simulate=simulate,
        analytics=False,
        report=lambda message: print(f"supervisor: {message}", flush=True),
        policy=CHAOS_POLICY,
        # A killed worker's partitions move once its session times out: keep that short (as the tests do).
        service_env={"HEARTH_DEVICE_ACTOR_SESSION_TIMEOUT_S": "6", **(service_env or {})},
        mqtt_brokers=mqtt_brokers,
        device_actors=device_actors,
        query_apis=query_apis,
    )
    stack.start()
    stop = threading.Event()
    supervising = threading.Thread(target=stack.supervise, args=(stop,), name="supervisor", daemon=True)
    supervising.start()
    try:
        yield stack
    finally:
        stop.set()
        supervising.join(10)
        stack.stop()


@pytest.fixture(scope="module")
def supervised_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with supervised(tmp_path_factory.mktemp("chaos")) as stack:
        yield stack
