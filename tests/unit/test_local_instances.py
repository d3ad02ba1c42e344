"""Several device-actor workers and query-API processes in the local stack (``hearth up --device-actors 3
--query-apis 2``), as it lays them out (nothing started): each its own supervised part with a name that
stays the same across restarts, a worker its own data directory and static membership, a query API its
own port; ports with room for them when a test or bench takes free ones."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from hearth_devstack.launch.service_processes import instance_part
from hearth_devstack.local import LocalStack, StackPorts, StartupError
from hearth_devstack.supervision.ports import port_is_free

pytestmark = pytest.mark.unit


def test_each_worker_and_query_api_is_a_part_of_its_own_with_a_stable_identity(tmp_path: Path) -> None:
    stack = LocalStack(home=tmp_path, device_actors=3, query_apis=2, analytics=False)
    specs = {spec.name: spec for spec in stack.part_specs()}
    assert {"device-actor", "device-actor.2", "device-actor.3", "query-api", "query-api.2"} <= set(specs)
    assert specs["device-actor.3"].depends_on == specs["device-actor"].depends_on
    assert specs["query-api.2"].url == "http://127.0.0.1:8002"

    services = stack.services()
    first, third = (services.part(name)[0].env for name in ("device-actor", "device-actor.3"))
    assert third["HEARTH_DEVICE_ACTOR_DATA_DIR"] == str(stack.data / "device-actor.3")
    assert first["HEARTH_DEVICE_ACTOR_DATA_DIR"] == str(stack.data / "device-actor")
    instances = {env["HEARTH_DEVICE_ACTOR_INSTANCE"] for env in (first, third)}
    assert len(instances) == 2  # static membership: one identity per worker, the same at each restart
    assert services.part("device-actor.3")[0].env == third
    assert services.part("query-api.2")[0].env["HEARTH_READ_MODELS_PORT"] == "8002"
    assert services.part("query-api")[0].env["HEARTH_READ_MODELS_PORT"] == "8001"


def test_instance_names_read_back() -> None:
    assert instance_part("device-actor.2") == ("device-actor", 2)
    assert instance_part("query-api") == ("query-api", 1)
    assert instance_part("device-gateway-1") == ("device-gateway-1", 1)  # a shard's part, not an instance
    assert instance_part("projector.2") == ("projector.2", 1)  # the projector does not scale


def test_a_second_query_api_s_port_that_clashes_is_named(tmp_path: Path) -> None:
    stack = LocalStack(home=tmp_path, ports=StackPorts(command_api=8002), query_apis=2, analytics=False)
    with pytest.raises(StartupError, match="query api 2"):
        stack.check_ports()


def test_free_ports_leave_room_for_the_parts_beyond_the_first() -> None:
    ports = StackPorts.free(room=3)
    taken = sorted(vars(ports).values())
    assert all(b - a >= 3 for a, b in itertools.pairwise(taken))
    assert all(port_is_free(port + 2) for port in taken)
