"""The command API through its composition root, ``make_app``, with a fake journal and feed: no broker.

The device book is the real one (pure, in memory); the test plays the device actor by applying facts
to it, as the journal feed would. Routes, their 4xx answers (each says what is wrong and writes nothing),
and the bearer-token rules.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from aiokafka.errors import KafkaTimeoutError

from hearth_command_api.app import make_app
from hearth_command_api.service.device_book import DeviceBook
from hearth_command_api.settings import CommandApiSettings
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain.home_facts import (
    ScheduleSet,
    ScheduleSuggestionAccepted,
    ScheduleSuggestionRejected,
)
from hearth_shared.schema.auth import Revocations, create_token, token_id
from hearth_shared.schema.events import (
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
from tests.support.fakes import FakeClock, FakeFeed, FakeTopicWriter

pytestmark = pytest.mark.unit

SECRET = "unit-test-secret"


@pytest.fixture
def writer() -> FakeTopicWriter:
    return FakeTopicWriter()


@pytest.fixture
def book() -> DeviceBook:
    view = DeviceBook()
    view.remember_device("h1-thermostat", "h1", "thermostat")
    view.remember_device("h2-lock", "h2", "lock")
    return view


@pytest.fixture
def feed() -> FakeFeed:
    return FakeFeed()


@pytest.fixture
def revocations() -> Revocations:
    return Revocations()


@pytest.fixture
async def anonymous(
    writer: FakeTopicWriter, book: DeviceBook, feed: FakeFeed, revocations: Revocations
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app with no token; each request names its own."""
    # credentials_wait_s=0: no broker-access follower here to say a credential was loaded
    settings = CommandApiSettings(
        stack=StackSettings(token_secret=SECRET), max_body_bytes=4096, credentials_wait_s=0
    )
    app = make_app(settings, writer=writer, book=book, feed=feed, revocations=revocations)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


@pytest.fixture
def api(anonymous: httpx.AsyncClient) -> httpx.AsyncClient:
    """The app's client with a token of home h1."""
    anonymous.headers["Authorization"] = f"Bearer {create_token(SECRET, home_id='h1')}"
    return anonymous


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


ADMIN = bearer(create_token(SECRET, admin=True))


async def test_a_command_is_one_inbox_request_and_202_pending(
    api: httpx.AsyncClient, writer: FakeTopicWriter
) -> None:
    answer = await api.post(
        "/v1/devices/h1-thermostat/commands",
        json={"name": "set_target_temperature", "params": {"target_c": 21.5}},
    )
    assert answer.status_code == 202, answer.text
    assert answer.json()["status"] == "pending"
    [request] = writer.requests
    assert isinstance(request, SubmitCommand)
    assert str(request.command_id) == answer.json()["command_id"] and request.params == {"target_c": 21.5}


async def test_the_same_idempotency_key_gives_the_same_command_once(
    api: httpx.AsyncClient, writer: FakeTopicWriter
) -> None:
    body = {"name": "set_target_temperature", "params": {"target_c": 21.5}}
    headers = {"Idempotency-Key": "k-1"}
    first = await api.post("/v1/devices/h1-thermostat/commands", json=body, headers=headers)
    again = await api.post("/v1/devices/h1-thermostat/commands", json=body, headers=headers)
    assert first.json()["command_id"] == again.json()["command_id"]
    assert len(writer.requests) == 1
    other = await api.post(
        "/v1/devices/h1-thermostat/commands", json={**body, "params": {"target_c": 22.0}}, headers=headers
    )
    assert other.status_code == 422 and "Idempotency-Key" in other.text
    assert len(writer.requests) == 1


async def test_out_of_range_is_422_and_writes_nothing(
    api: httpx.AsyncClient, writer: FakeTopicWriter
) -> None:
    answer = await api.post(
        "/v1/devices/h1-thermostat/commands",
        json={"name": "set_target_temperature", "params": {"target_c": 99}},
    )
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["type"] == "out_of_range"
    assert writer.requests == []


async def test_another_homes_device_is_404_like_one_that_does_not_exist(
    api: httpx.AsyncClient, writer: FakeTopicWriter
) -> None:
    theirs = await api.post("/v1/devices/h2-lock/commands", json={"name": "unlock", "params": {}})
    nobody = await api.post("/v1/devices/nobody-lock/commands", json={"name": "unlock", "params": {}})
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.json()["detail"].replace("h2-lock", "X") == nobody.json()["detail"].replace(
        "nobody-lock", "X"
    )
    assert writer.requests == []


async def test_wait_returns_once_the_device_book_sees_the_status(
    api: httpx.AsyncClient, writer: FakeTopicWriter, book: DeviceBook
) -> None:
    async def actor() -> None:  # plays the device actor: accepts, then converges, the command
        await writer.sent.wait()
        request = writer.requests[0]
        assert isinstance(request, SubmitCommand)
        now, ref = utcnow(), CommandRef(command_id=request.command_id)
        for version, fact in enumerate((CommandAccepted, CommandConverged), start=2):
            book.apply(
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
    anonymous: httpx.AsyncClient, writer: FakeTopicWriter, book: DeviceBook
) -> None:
    answer = await anonymous.post(
        "/v1/devices",
        json={"device_id": "h1-door", "home_id": "h1", "type": "lock", "name": "Door"},
        headers=ADMIN,
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["home_id"] == "h1"
    credentials = answer.json()["credentials"]
    assert credentials["username"] == "h1-door" and len(credentials["password"]) >= 32
    register, issue = writer.requests
    assert isinstance(register, RegisterDevice) and register.device_id == "h1-door"
    assert isinstance(issue, IssueCredentials) and issue.password_hash.startswith("$7$")
    assert credentials["password"] not in issue.password_hash  # only the salted hash leaves the API
    assert book.devices["h1-door"].home_id == "h1"


COMMAND = {"name": "set_target_temperature", "params": {"target_c": 21.5}}


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({}, "missing bearer token"),
        (bearer("hth1_not-a-token"), "invalid token"),
        (bearer(create_token("another-secret", home_id="h1")), "invalid token"),
        (
            bearer(create_token(SECRET, home_id="h1", expires_in=timedelta(minutes=1), now=0)),
            "invalid token: token expired",
        ),
    ],
    ids=["none", "malformed", "another-secret", "expired"],
)
async def test_a_request_without_a_good_token_is_401_and_writes_nothing(
    anonymous: httpx.AsyncClient, writer: FakeTopicWriter, headers: dict[str, str], says: str
) -> None:
    answer = await anonymous.post("/v1/devices/h1-thermostat/commands", json=COMMAND, headers=headers)
    assert answer.status_code == 401, answer.text
    assert answer.json()["detail"].startswith(says)
    assert answer.headers["www-authenticate"] == "Bearer"
    assert writer.requests == []


@pytest.mark.parametrize(
    ("path", "body", "where"),
    [
        ("/v1/devices/bad%20id/commands", COMMAND, "device_id"),
        ("/v1/devices/h1-thermostat/commands", {"name": "self_destruct", "params": {}}, "unknown_command"),
        ("/v1/devices/h1-thermostat/commands", {"params": {"target_c": 21.5}}, "name"),
        ("/v1/devices", {"home_id": "h1", "type": "toaster", "name": "T"}, "type"),
        ("/v1/devices", {"home_id": "h1", "type": "lock", "name": "line\nbreak"}, "name"),
        ("/v1/devices", {"device_id": "mine", "home_id": "h1", "type": "lock", "name": "D"}, "device_id"),
    ],
    ids=["bad-device-id", "unknown-command", "no-name", "unknown-type", "control-character", "chosen-id"],
)
async def test_malformed_input_is_422_naming_the_field_and_writes_nothing(
    api: httpx.AsyncClient, writer: FakeTopicWriter, path: str, body: dict[str, Any], where: str
) -> None:
    answer = await api.post(path, json=body)
    assert answer.status_code == 422, answer.text
    errors = answer.json()["detail"]  # `where`: a field of the location, or the error type
    assert any(where in [*map(str, e["loc"]), e["type"]] for e in errors), answer.text
    assert writer.requests == []


async def test_a_body_over_the_limit_is_413_before_it_is_read(
    api: httpx.AsyncClient, writer: FakeTopicWriter
) -> None:
    big = {"name": "set_hvac_mode", "params": {"mode": "x" * 5000}}  # the fixture's limit: 4096 bytes
    answer = await api.post("/v1/devices/h1-thermostat/commands", json=big)
    assert answer.status_code == 413, answer.text
    assert writer.requests == []


async def test_a_home_token_registers_only_in_its_home_and_the_server_names_the_device(
    api: httpx.AsyncClient, writer: FakeTopicWriter, book: DeviceBook
) -> None:
    elsewhere = await api.post("/v1/devices", json={"home_id": "h2", "type": "lock", "name": "Door"})
    assert elsewhere.status_code == 403 and "h2" in elsewhere.json()["detail"]
    assert writer.requests == []
    mine = await api.post("/v1/devices", json={"home_id": "h1", "type": "lock", "name": "Door"})
    assert mine.status_code == 201, mine.text
    device_id = mine.json()["device_id"]
    assert device_id.startswith("lock-") and book.devices[device_id].home_id == "h1"
    assert [type(r) for r in writer.requests] == [RegisterDevice, IssueCredentials]


async def test_an_admin_choosing_a_taken_id_gets_409(
    anonymous: httpx.AsyncClient, writer: FakeTopicWriter
) -> None:
    body = {"device_id": "h2-lock", "home_id": "h2", "type": "lock", "name": "Door"}
    answer = await anonymous.post("/v1/devices", json=body, headers=ADMIN)
    assert answer.status_code == 409 and "h2-lock" in answer.json()["detail"]
    assert writer.requests == []


async def test_a_wait_that_times_out_answers_the_status_so_far(api: httpx.AsyncClient) -> None:
    answer = await api.post("/v1/devices/h1-thermostat/commands?wait=converged&timeout_s=0.2", json=COMMAND)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "pending" and answer.json()["timed_out"] is True


async def test_only_an_admin_token_revokes_a_token(
    anonymous: httpx.AsyncClient, writer: FakeTopicWriter
) -> None:
    home = bearer(create_token(SECRET, home_id="h1"))
    refused = await anonymous.delete("/v1/tokens/some-token-id", headers=home)
    assert refused.status_code == 403 and writer.revocations == []
    answer = await anonymous.delete("/v1/tokens/some-token-id", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    [fact] = writer.revocations
    assert fact.token_id == answer.json()["token_id"] == "some-token-id"


async def test_a_revoked_token_is_401(
    anonymous: httpx.AsyncClient, writer: FakeTopicWriter, revocations: Revocations
) -> None:
    token = create_token(SECRET, home_id="h1")
    revocations.add(token_id(token))  # what the revocation feed does on reading the fact
    answer = await anonymous.post("/v1/devices/h1-thermostat/commands", json=COMMAND, headers=bearer(token))
    assert answer.status_code == 401 and answer.json()["detail"] == "invalid token: token revoked"
    assert writer.requests == []


async def test_healthz_is_503_until_the_device_book_has_caught_up(
    anonymous: httpx.AsyncClient, feed: FakeFeed
) -> None:
    feed.caught_up.clear()
    waiting = await anonymous.get("/healthz")
    assert waiting.status_code == 503 and "journal" in waiting.json()["status"]
    restart = waiting.json()["restart"]  # what the feed's start read, as hearth status shows it
    assert restart["started_from"] == "first offset" and restart["replayed"] == 0
    assert {"gap", "caught_up_s", "snapshot_age_s", "snapshots_saved"} <= set(restart)


async def test_a_retry_after_the_command_window_is_a_new_command(
    writer: FakeTopicWriter, feed: FakeFeed, revocations: Revocations
) -> None:
    clock = FakeClock(utcnow())
    book = DeviceBook(window_s=3600, clock=clock)
    book.remember_device("h1-thermostat", "h1", "thermostat")
    settings = CommandApiSettings(stack=StackSettings(token_secret=SECRET), command_window_s=3600)
    app = make_app(settings, writer=writer, book=book, feed=feed, revocations=revocations)
    headers = {"Idempotency-Key": "k-1", **bearer(create_token(SECRET, home_id="h1"))}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:

        async def post(params: dict[str, Any]) -> httpx.Response:
            body = {"name": "set_target_temperature", "params": params}
            return await api.post("/v1/devices/h1-thermostat/commands", json=body, headers=headers)

        first = await post({"target_c": 21.5})
        command_id = first.json()["command_id"]
        book.apply(  # the device actor: converged, now
            CommandConverged(
                event_id=new_id(),
                device_id="h1-thermostat",
                home_id="h1",
                version=3,
                occurred_at=clock.now,
                recorded_at=clock.now,
                correlation_id=uuid.UUID(command_id),
                payload=CommandRef(command_id=uuid.UUID(command_id)),
            )
        )
        clock.now += timedelta(seconds=3599)  # within the window: the same command, nothing written
        within = await post({"target_c": 21.5})
        assert (within.status_code, within.json()["command_id"]) == (202, command_id)
        assert within.json()["status"] == "converged" and len(writer.requests) == 1
        assert (await post({"target_c": 22.0})).status_code == 422

        clock.now += timedelta(seconds=1)  # the window has passed: a new command, another body or not
        after = await post({"target_c": 22.0})
        assert after.status_code == 202, after.text
        assert after.json()["command_id"] != command_id and after.json()["status"] == "pending"
        [_, request] = writer.requests
        assert isinstance(request, SubmitCommand) and str(request.command_id) == after.json()["command_id"]


def test_the_command_window_is_a_setting_the_device_book_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEARTH_COMMAND_API_COMMAND_WINDOW_S", "7200")
    settings = CommandApiSettings(stack=StackSettings(token_secret=SECRET))
    assert settings.command_window_s == 7200
    book: DeviceBook = make_app(settings, writer=FakeTopicWriter(), feed=FakeFeed()).state.book
    assert book.window_s == 7200
    with pytest.raises(ValueError, match="at least max_expires_in_s / 64"):
        CommandApiSettings(stack=StackSettings(token_secret=SECRET), command_window_s=60)


async def test_deciding_on_a_suggestion_is_one_home_fact_and_a_retry_the_same_fact(
    api: httpx.AsyncClient, writer: FakeTopicWriter
) -> None:
    suggestion = uuid.uuid4()
    base = f"/v1/devices/h1-thermostat/schedule/suggestions/{suggestion}"
    first = await api.post(f"{base}/accept")
    again = await api.post(f"{base}/accept")
    rejected = await api.post(f"{base}/reject")
    assert first.status_code == again.status_code == rejected.status_code == 202, first.text
    assert first.json() == {
        "device_id": "h1-thermostat",
        "suggestion_id": str(suggestion),
        "decision": "accepted",
    }
    accepted, accepted_again, rejection = writer.home_facts
    assert isinstance(accepted, ScheduleSuggestionAccepted) and isinstance(
        rejection, ScheduleSuggestionRejected
    )
    assert (
        accepted.fact_id == accepted_again.fact_id != rejection.fact_id
    )  # derived: a retry is the same fact
    assert (accepted.home_id, accepted.device_id, accepted.payload.suggestion_id) == (
        "h1",
        "h1-thermostat",
        suggestion,
    )
    theirs = await api.post(f"/v1/devices/h2-lock/schedule/suggestions/{suggestion}/accept")
    malformed = await api.post("/v1/devices/h1-thermostat/schedule/suggestions/not-an-id/accept")
    assert (theirs.status_code, malformed.status_code) == (404, 422)
    assert len(writer.home_facts) == 3


async def test_a_schedule_takes_the_households_preheat_cap_in_minutes(
    api: httpx.AsyncClient, writer: FakeTopicWriter
) -> None:
    entry = {
        "days": ["mon"],
        "at": "06:30",
        "command": {"name": "set_target_temperature", "params": {"target_c": 21}},
    }
    put = await api.put(
        "/v1/devices/h1-thermostat/schedule",
        json={"program": [entry], "preheat": True, "preheat_max_min": 300},
    )
    assert put.status_code == 200, put.text
    assert put.json()["preheat_max_min"] == 300
    (fact,) = writer.home_facts
    assert isinstance(fact, ScheduleSet) and fact.payload.preheat_max_s == 5 * 3600
    too_long = await api.put(
        "/v1/devices/h1-thermostat/schedule", json={"program": [entry], "preheat_max_min": 721}
    )
    assert too_long.status_code == 422 and len(writer.home_facts) == 1


async def test_a_write_kafka_refuses_is_503_with_what_to_do_and_the_retry_makes_the_command(
    api: httpx.AsyncClient, writer: FakeTopicWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refused(request: Inbound) -> None:
        raise KafkaTimeoutError()

    body = {"name": "set_target_temperature", "params": {"target_c": 21.5}}
    headers = {"Idempotency-Key": "k-503"}
    with monkeypatch.context() as patched:
        patched.setattr(writer, "send_request", refused)
        answer = await api.post("/v1/devices/h1-thermostat/commands", json=body, headers=headers)
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
    assert "KafkaTimeoutError" in answer.json()["detail"] and "Idempotency-Key" in answer.json()["detail"]
    retried = await api.post("/v1/devices/h1-thermostat/commands", json=body, headers=headers)
    assert retried.status_code == 202 and len(writer.requests) == 1  # not remembered as sent before
