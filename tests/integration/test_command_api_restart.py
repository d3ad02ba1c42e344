"""The command API restarts from its device book's snapshot on the real broker, in process (``make_app``,
its lifespan, its Kafka journal, follower and snapshot store), on a test's own topics.

The test plays the device actor with the actor's own pure functions (``decide``, ``stamp``, ``evolve``):
it decides the requests the API put on the inbox, and the device's reports, into journal facts. A device
is registered and commanded to convergence; the API stops (its follower saves a snapshot); a retention
window passes over the whole journal; a started API then still knows the device (a command to it is a
202, not a 404) and the finished command's key, started from the snapshot and read only the tail.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from hearth_command_api.app import make_app
from hearth_command_api.settings import CommandApiSettings
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain import decide, evolve, stamp
from hearth_shared.domain.storable import decode_request
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.auth import create_token
from hearth_shared.schema.events import Event, Inbound, utcnow
from tests.support.inbox_requests import ack_request, report_request
from tests.support.platform import SECRET
from tests.support.topics import pass_retention, produce_facts, read_topic
from tests.support.waiting import poll_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

HOME = "h1"
SET_21 = {"name": "set_target_temperature", "params": {"target_c": 21.5}}


class PlayedActor:
    """The device actor's decisions on the test's topics: requests decided with the domain's functions,
    their facts appended to the journal (keyed by device, as the actor's are)."""

    def __init__(self, stack: StackSettings) -> None:
        self.stack = stack
        self.twins: dict[str, Twin] = {}
        self.decided: set[uuid.UUID] = set()
        self.facts: list[Event] = []  # every fact it appended

    async def decide(self, *requests: Inbound) -> list[Event]:
        facts: list[Event] = []
        now = utcnow()
        for request in requests:
            twin = self.twins.get(request.device_id)
            home_id = twin.home_id if twin else getattr(request, "home_id", "")
            changes = decide(twin, request, now)
            for fact in stamp(
                twin,
                changes,
                home_id=home_id,
                device_id=request.device_id,
                now=now,
                causation_id=request.request_id,
            ):
                twin = evolve(twin, fact)
                facts.append(fact)
            if twin is not None:
                self.twins[request.device_id] = twin
        await produce_facts(self.stack, facts)
        self.facts += facts
        return facts

    async def decide_inbox(self) -> list[Event]:
        """The requests the command API put on the inbox since the last call, decided."""
        requests = await read_topic(self.stack, self.stack.topics.command_lane, decode_request)
        fresh = [r for r in requests if r.request_id not in self.decided]
        self.decided.update(r.request_id for r in fresh)
        return await self.decide(*fresh)


@asynccontextmanager
async def command_api(stack: StackSettings) -> AsyncIterator[httpx.AsyncClient]:
    """The command API in this process, healthy (its device book caught up), with an admin token."""
    app = make_app(CommandApiSettings(stack=stack))
    headers = {"Authorization": f"Bearer {create_token(SECRET, admin=True)}"}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api", headers=headers) as client:
            await poll_until(
                lambda: client.get("/healthz"), lambda r: r.status_code == 200, "the device book to catch up"
            )
            yield client


async def register(api: httpx.AsyncClient, actor: PlayedActor, device_id: str) -> None:
    body = {"device_id": device_id, "home_id": HOME, "type": "thermostat", "name": device_id}
    answer = await api.post("/v1/devices", json={**body, "simulated": True})
    assert answer.status_code == 201, answer.text
    assert [f.type for f in await actor.decide_inbox()] == ["device.registered"]


async def command(api: httpx.AsyncClient, device_id: str, key: str, **query: Any) -> httpx.Response:
    path = f"/v1/devices/{device_id}/commands"
    return await api.post(path, json=SET_21, headers={"Idempotency-Key": key}, params=query)


async def test_a_restart_after_retention_passed_starts_from_the_snapshot_and_knows_the_device(
    stack: StackSettings,
) -> None:
    actor = PlayedActor(stack)
    async with command_api(stack) as api:
        await register(api, actor, "kitchen")
        await actor.decide(report_request("kitchen", 1, ambient_c=19.0, hvac_mode="heat", target_c=19.0))
        sent = await command(api, "kitchen", "k1")
        assert (sent.status_code, sent.json()["status"]) == (202, "pending"), sent.text
        command_id = uuid.UUID(sent.json()["command_id"])
        steps = await actor.decide_inbox()  # requested, accepted, dispatched (the device is online)
        steps += await actor.decide(ack_request("kitchen", command_id))
        steps += await actor.decide(report_request("kitchen", 2, target_c=21.5, hvac_action="heating"))
        assert "command.converged" in [f.type for f in steps]
        waited = await command(api, "kitchen", "k1", wait="converged", timeout_s=20)
        assert (waited.json()["command_id"], waited.json()["status"]) == (str(command_id), "converged")
        first_start = (await api.get("/healthz")).json()["restart"]
        assert first_start["started_from"] == "first offset (no snapshot yet)"
        folded = len(actor.facts)
    # stopped cleanly: the follower saved a snapshot of the view and the positions it reflects

    await pass_retention(stack.kafka_bootstrap_servers, stack.topics.journal)  # every fact above, gone
    tail = await actor.decide(report_request("kitchen", 3, ambient_c=20.0))  # telemetry: read, not kept

    async with command_api(stack) as api:
        restart = (await api.get("/healthz")).json()["restart"]
        assert (restart["started_from"], restart["gap"]) == ("snapshot", 0)
        assert restart["replayed"] == len(tail) < folded  # only the tail after the snapshot
        again = await command(api, "kitchen", "k1")  # the finished command's key, from the snapshot
        assert (again.status_code, again.json()["command_id"]) == (202, str(command_id))
        assert again.json()["status"] == "converged"
        fresh = await command(api, "kitchen", "k2")  # the device registered before the window
        assert fresh.status_code == 202, fresh.text
        assert [f.type for f in await actor.decide_inbox()][:2] == ["command.requested", "command.accepted"]
