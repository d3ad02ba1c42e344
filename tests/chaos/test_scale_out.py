"""The scale-out drill's smaller form (issue 25 point 3; the whole drill is ``hearth bench drill``): a
stack of several of each part that scales, under steady commands and telemetry, loses one of each kind
in turn to kill -9 and serves through it.

The stack is ``hearth up``'s (``LocalStack``, supervised) with 1 Kafka broker, 2 MQTT broker shards
(each its Mosquitto, broker-access follower and device gateway), 2 device-actor workers and 2 query-API
processes of one process each (``query-api``, ``query-api.2``). The devices are simulated thermostats
(the stack's simulator, a hub per shard; half of them on each shard), reporting once a second and
acknowledging every command with the state it asked for. Commands go at a steady rate with an
Idempotency-Key each, retried with that key when a call fails (``hearth_devstack.workload.command_ledger``).

Killed in turn: an actor worker (``device-actor.2``: the other serves its partitions, or it rejoins as
itself, static membership), shard 1's gateway (``device-gateway-1``: its broker keeps what came for it
in its persistent sessions) and a query-API process (``query-api.2``: the other answers meanwhile).
After each, the supervisor has it healthy again and a probe command to a device of each shard
converges, read as converged through every query-API process. Then: no accepted command lost, doubled
or stuck; the journal holds each fact once, each device's versions 1..N (``journal_check``); the views
equal a replay (``verify``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import pytest

from hearth_devstack.launch.service_processes import instance_port
from hearth_devstack.local import LocalStack
from hearth_devstack.workload.command_ledger import (
    Ledger,
    Outcome,
    all_ended,
    converged_everywhere,
    steady,
    submit,
)
from hearth_devstack.workload.journal_check import faultless, journal_faults, read_journal
from hearth_read_models.rebuild.run import verify
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.adapters.http_calls import GatedClient
from hearth_shared.schema.auth import create_token
from hearth_shared.schema.shards import DEFAULT_SHARD, assign_shard
from tests.chaos.conftest import supervised
from tests.support.part_kills import killed_and_back
from tests.support.waiting import eventually, twin_when

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(900)]

SHARDS = (DEFAULT_SHARD, "1")
KILLED = ("device-actor.2", "device-gateway-1", "query-api.2")
DEVICES_PER_SHARD = 3  # the first of each shard is its probe, the others take the load
RATE = 3.0  # commands per second over the load devices
SETTLE_S = 1.5  # steady commands between one part's recovery and the next kill


@pytest.fixture(scope="module")
def scaled_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    one_process = {"HEARTH_READ_MODELS_API_WORKERS": "1"}  # a query-API process is one process
    home = tmp_path_factory.mktemp("scale-out")
    with supervised(home, one_process, simulate=True, mqtt_brokers=2, device_actors=2, query_apis=2) as stack:
        yield stack


def devices_by_shard() -> dict[str, list[str]]:
    """Device ids, ``DEVICES_PER_SHARD`` on each shard (the command API assigns ``assign_shard``'s)."""
    by_shard: dict[str, list[str]] = {shard: [] for shard in SHARDS}
    n = 0
    while any(len(ids) < DEVICES_PER_SHARD for ids in by_shard.values()):
        device_id = f"scale-thermostat-{n}"
        if len(ids := by_shard[assign_shard(device_id, SHARDS)]) < DEVICES_PER_SHARD:
            ids.append(device_id)
        n += 1
    return by_shard


async def test_a_scaled_stack_serves_through_a_kill_of_each_kind(scaled_stack: LocalStack) -> None:
    stack = scaled_stack
    settings = stack.settings
    headers = {"Authorization": f"Bearer {create_token(settings.token_secret, admin=True)}"}
    query_urls = [f"http://127.0.0.1:{instance_port(stack.ports.query_api, n)}" for n in (1, 2)]
    by_shard = devices_by_shard()
    probes = [ids[0] for ids in by_shard.values()]
    load = [d for ids in by_shard.values() for d in ids[1:]]
    ledger, recoveries = Ledger(), list[dict[str, object]]()
    async with contextlib.AsyncExitStack() as clients:
        api = await clients.enter_async_context(
            GatedClient(base_url=f"http://127.0.0.1:{stack.ports.command_api}", headers=headers)
        )
        queries = [
            await clients.enter_async_context(GatedClient(base_url=url, headers=headers))
            for url in query_urls
        ]
        for device_id in [*probes, *load]:
            body = {"device_id": device_id, "home_id": "scale", "type": "thermostat", "name": device_id}
            response = await api.post("/v1/devices", json={**body, "simulated": True})
            assert response.status_code == 201, response.text
        for device_id in [*probes, *load]:  # the simulator plays each through its shard's broker
            await twin_when(queries[0], device_id, lambda t: bool(t["reported"]), timeout_s=120)

        stop = asyncio.Event()
        driver = asyncio.create_task(steady(api, ledger, load, RATE, stop))
        for name in KILLED:
            await asyncio.sleep(SETTLE_S)
            kill = await killed_and_back(stack, name)
            healthy_s = time.monotonic() - kill.at
            sent = [await submit(api, ledger, probe, 20.0 + len(recoveries)) for probe in probes]
            for command_id in sent:
                await eventually(
                    lambda command_id=command_id: converged_everywhere(queries, command_id),
                    f"probe {command_id} converged, after the {name} kill",
                    timeout_s=120,
                    every_s=0.2,
                )
            converged_s = time.monotonic() - kill.at
            recoveries.append(
                {"part": name, "healthy_s": round(healthy_s, 1), "converged_s": round(converged_s, 1)}
            )
            print(f"scale-out: {recoveries[-1]}", flush=True)
        await asyncio.sleep(SETTLE_S)
        stop.set()
        await driver

        statuses: dict[str, str | None] = {}
        # Every command ends by its 30 s deadline at the latest; one still open after 60 s is stuck.
        with contextlib.suppress(AssertionError):
            await eventually(
                lambda: all_ended(queries, ledger, statuses), "every command to end", timeout_s=60, every_s=1
            )

    journal = journal_faults(await read_journal(settings))
    outcome = Outcome.of(ledger, statuses, journal["doubled_commands"])
    assert ledger.accepted, "no command was sent"
    assert outcome == Outcome([], [], []), (outcome, recoveries)
    assert faultless(journal), journal
    verified = await verify(ReadModelSettings(stack=settings), processes=1)
    assert verified.differences == [], verified.differences[:5]
