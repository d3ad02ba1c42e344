"""The command API through its composition root, ``make_app``, with a fake journal and feed: no broker.

The registry view is the real one (pure, in memory); the test plays the device actor by applying facts
to it, as the journal feed would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from hearth_command_api.app import make_app
from hearth_command_api.registry import RegistryView
from hearth_command_api.settings import CommandApiSettings
from hearth_shared.auth import create_token
from hearth_shared.events import (
    CommandAccepted,
    CommandConverged,
    CommandRef,
    Inbound,
    IssueCredentials,
    RegisterDevice,
    SubmitCommand,
    new_id,
    utcnow,
)
from hearth_shared.settings import StackSettings

pytestmark = pytest.mark.unit

SECRET = "unit-test-secret"


class FakeJournal:
    def __init__(self) -> None:
        self.requests: list[Inbound] = []
        self.submitted = asyncio.Event()

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def submit(self, request: Inbound) -> None:
        self.requests.append(request)
        self.submitted.set()


class FakeFeed:
    def __init__(self) -> None:
        self.caught_up = asyncio.Event()
        self.caught_up.set()

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@pytest.fixture
def journal() -> FakeJournal:
    return FakeJournal()


@pytest.fixture
def registry() -> RegistryView:
    view = RegistryView()
    view.remember_device("h1-thermostat", "h1", "thermostat")
    view.remember_device("h2-lock", "h2", "lock")
    return view


@pytest.fixture
async def api(journal: FakeJournal, registry: RegistryView) -> AsyncIterator[httpx.AsyncClient]:
    settings = CommandApiSettings(stack=StackSettings(token_secret=SECRET))
    app = make_app(settings, journal=journal, registry=registry, feed=FakeFeed())  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    token = create_token(SECRET, home_id="h1")
    async with httpx.AsyncClient(
        transport=transport, base_url="http://api", headers={"Authorization": f"Bearer {token}"}
    ) as client:
        yield client


async def test_a_command_is_one_inbox_request_and_202_pending(
    api: httpx.AsyncClient, journal: FakeJournal
) -> None:
    answer = await api.post(
        "/v1/devices/h1-thermostat/commands",
        json={"name": "set_target_temperature", "params": {"target_c": 21.5}},
    )
    assert answer.status_code == 202, answer.text
    assert answer.json()["status"] == "pending"
    [request] = journal.requests
    assert isinstance(request, SubmitCommand)
    assert str(request.command_id) == answer.json()["command_id"] and request.params == {"target_c": 21.5}


async def test_the_same_idempotency_key_gives_the_same_command_once(
    api: httpx.AsyncClient, journal: FakeJournal
) -> None:
    body = {"name": "set_target_temperature", "params": {"target_c": 21.5}}
    headers = {"Idempotency-Key": "k-1"}
    first = await api.post("/v1/devices/h1-thermostat/commands", json=body, headers=headers)
    again = await api.post("/v1/devices/h1-thermostat/commands", json=body, headers=headers)
    assert first.json()["command_id"] == again.json()["command_id"]
    assert len(journal.requests) == 1
    other = await api.post(
        "/v1/devices/h1-thermostat/commands", json={**body, "params": {"target_c": 22.0}}, headers=headers
    )
    assert other.status_code == 422 and "Idempotency-Key" in other.text
    assert len(journal.requests) == 1


async def test_out_of_range_is_422_and_writes_nothing(api: httpx.AsyncClient, journal: FakeJournal) -> None:
    answer = await api.post(
        "/v1/devices/h1-thermostat/commands",
        json={"name": "set_target_temperature", "params": {"target_c": 99}},
    )
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["type"] == "out_of_range"
    assert journal.requests == []


async def test_another_homes_device_is_404_like_one_that_does_not_exist(
    api: httpx.AsyncClient, journal: FakeJournal
) -> None:
    theirs = await api.post("/v1/devices/h2-lock/commands", json={"name": "unlock", "params": {}})
    nobody = await api.post("/v1/devices/nobody-lock/commands", json={"name": "unlock", "params": {}})
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.json()["detail"].replace("h2-lock", "X") == nobody.json()["detail"].replace(
        "nobody-lock", "X"
    )
    assert journal.requests == []


async def test_wait_returns_once_the_registry_sees_the_status(
    api: httpx.AsyncClient, journal: FakeJournal, registry: RegistryView
) -> None:
    async def actor() -> None:  # plays the device actor: accepts, then converges, the command
        await journal.submitted.wait()
        request = journal.requests[0]
        assert isinstance(request, SubmitCommand)
        now, ref = utcnow(), CommandRef(command_id=request.command_id)
        for version, fact in enumerate((CommandAccepted, CommandConverged), start=2):
            registry.apply(
                fact(
                    event_id=new_id(),
                    device_id=request.device_id,
                    home_id="h1",
                    version=version,
                    occurred_at=now,
                    recorded_at=now,
                    correlation_id=request.command_id,
                    payload=ref,
                )
            )

    playing = asyncio.create_task(actor())
    answer = await api.post(
        "/v1/devices/h1-thermostat/commands?wait=converged&timeout_s=5",
        json={"name": "set_target_temperature", "params": {"target_c": 21.5}},
    )
    await playing
    assert answer.status_code == 200
    assert answer.json()["status"] == "converged" and answer.json()["timed_out"] is False


async def test_an_admin_registers_a_device_and_gets_its_credentials_once(
    journal: FakeJournal, registry: RegistryView
) -> None:
    settings = CommandApiSettings(stack=StackSettings(token_secret=SECRET))
    app = make_app(settings, journal=journal, registry=registry, feed=FakeFeed())  # type: ignore[arg-type]
    admin = {"Authorization": f"Bearer {create_token(SECRET, admin=True)}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        answer = await client.post(
            "/v1/devices",
            json={"device_id": "h1-door", "home_id": "h1", "type": "lock", "name": "Door"},
            headers=admin,
        )
    assert answer.status_code == 201, answer.text
    assert answer.json()["home_id"] == "h1"
    credentials = answer.json()["credentials"]
    assert credentials["username"] == "h1-door" and len(credentials["password"]) >= 32
    register, issue = journal.requests
    assert isinstance(register, RegisterDevice) and register.device_id == "h1-door"
    assert isinstance(issue, IssueCredentials) and issue.password_hash.startswith("$7$")
    assert credentials["password"] not in issue.password_hash  # only the salted hash leaves the API
    assert registry.devices["h1-door"].home_id == "h1"
