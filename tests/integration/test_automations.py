"""Automations on the real stack: a fact triggers a command through the command path and one signed
webhook to a real HTTP receiver in the test; the run is in the journal and served with its command's
status; a loop (an automation triggered by its own command's facts) is suspended with its reason."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.support.automations import Receiver, automation_listed, receiving, runs, signed_by
from tests.support.registration import register_device
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SECRET = "a-webhook-secret-of-the-test"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as r:
        yield r


async def test_a_fact_sends_a_command_and_one_signed_webhook(
    api: httpx.AsyncClient, query: httpx.AsyncClient, home: str, receiver: Receiver
) -> None:
    started = datetime.now(UTC) - timedelta(seconds=5)
    watched = await register_device(api, home, "thermostat", name="living room")
    follower = await register_device(api, home, "thermostat", name="bedroom")
    response = await api.put(
        f"/v1/homes/{home}/notifications", json={"webhook_url": receiver.url, "secret": SECRET}
    )
    assert response.status_code == 200, response.text
    response = await api.post(
        "/v1/automations",
        json={
            "home_id": home,
            "name": "bedroom follows the living room",
            "trigger": {"fact": "thermostat.target_set", "device_id": watched},
            "actions": [
                {"command": {"device_id": follower, "name": "set_hvac_mode", "params": {"mode": "heat"}}},
                {"notify": {"message": "the living room changed"}},
            ],
        },
    )
    assert response.status_code == 201, response.text
    automation_id = response.json()["automation_id"]
    await eventually(
        lambda: automation_listed(query, automation_id), "the automation in the query API", timeout_s=15
    )

    sent = await api.post(
        f"/v1/devices/{watched}/commands", json={"name": "set_target_temperature", "params": {"target_c": 22}}
    )
    assert sent.status_code == 202, sent.text

    async def one_run_with_its_command() -> bool:
        found = (await runs(query, automation_id))["runs"]
        return len(found) == 1 and found[0]["actions"][0]["status"] != "pending"

    await eventually(one_run_with_its_command, "the run and its command's status", timeout_s=30)
    run = (await runs(query, automation_id))["runs"][0]
    # triggered by the retired name, the run names the fact as the journal holds it now
    assert run["fired"] is True and run["trigger"]["type"] == "device.desired_set"
    command = run["actions"][0]
    assert command["kind"] == "command" and command["device_id"] == follower
    view = (await query.get(f"/v1/commands/{command['action_id']}")).json()
    assert view["name"] == "set_hvac_mode" and view["params"] == {"mode": "heat"}

    await eventually(lambda: len(receiver.received) >= 1, "the webhook", timeout_s=30)
    await asyncio.sleep(3)  # nothing more arrives: one alert, one notification
    assert len(receiver.received) == 1
    headers, body = receiver.received[0]
    assert signed_by(SECRET, headers, body)
    content = json.loads(body)
    assert content["message"] == "the living room changed" and content["automation_id"] == automation_id
    assert headers["x-hearth-notification-id"] == content["notification_id"] == run["actions"][1]["action_id"]

    async def delivered() -> bool:
        found = (await query.get(f"/v1/homes/{home}/deliveries")).json()["deliveries"]
        return [d["outcome"] for d in found] == ["notification.delivered"]

    await eventually(delivered, "the delivery fact", timeout_s=15)

    # a backtest over the recorded stretch counts what the live run counted, and acts on nothing
    stretch = {"from": started.isoformat(), "to": (datetime.now(UTC) + timedelta(seconds=5)).isoformat()}
    response = await query.post(f"/v1/automations/{automation_id}/backtest", json=stretch)
    assert response.status_code == 200, response.text
    assert response.json()["fired"] == len((await runs(query, automation_id))["runs"]) == 1
    assert len(receiver.received) == 1


async def test_an_automation_triggered_by_its_own_command_is_suspended(
    api: httpx.AsyncClient, query: httpx.AsyncClient, home: str
) -> None:
    device = await register_device(api, home, "thermostat")
    response = await api.post(
        "/v1/automations",
        json={
            "home_id": home,
            "name": "a loop",
            "trigger": {"fact": "thermostat.hvac_mode_set", "device_id": device},
            "actions": [
                {"command": {"device_id": device, "name": "set_hvac_mode", "params": {"mode": "cool"}}}
            ],
        },
    )
    assert response.status_code == 201, response.text
    automation_id = response.json()["automation_id"]
    await eventually(
        lambda: automation_listed(query, automation_id), "the automation in the query API", timeout_s=15
    )
    sent = await api.post(
        f"/v1/devices/{device}/commands", json={"name": "set_hvac_mode", "params": {"mode": "heat"}}
    )
    assert sent.status_code == 202

    async def suspended_after_its_run() -> bool:
        # the suspension is folded in the query API's memory, the run projected into PostgreSQL: each
        # path has its own lag, so both are waited for
        answer = await runs(query, automation_id)
        return bool(answer["suspended"] == "own_action" and len(answer["runs"]) >= 1)

    await eventually(suspended_after_its_run, "the suspension and the run before it", timeout_s=30)
    assert len((await runs(query, automation_id))["runs"]) == 1  # the person's trigger ran, its own did not


async def test_an_automation_naming_another_homes_device_is_a_422(api: httpx.AsyncClient, home: str) -> None:
    response = await api.post(
        "/v1/automations",
        json={
            "home_id": home,
            "name": "x",
            "trigger": {"fact": "anomaly.detected"},
            "actions": [{"command": {"device_id": "not-mine", "name": "lock", "params": {}}}],
        },
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "unknown_device"


async def test_a_time_trigger_fires_once_at_its_time_in_the_homes_zone(
    api: httpx.AsyncClient, query: httpx.AsyncClient, home: str
) -> None:
    device = await register_device(api, home, "thermostat")
    zone = await api.put(f"/v1/homes/{home}", json={"timezone": "America/New_York"})
    assert zone.status_code == 200, zone.text
    at = (datetime.now(ZoneInfo("America/New_York")) + timedelta(seconds=8)).strftime("%H:%M:%S")
    response = await api.post(
        "/v1/automations",
        json={
            "home_id": home,
            "name": "at a time",
            "trigger": {"time": {"at": at}},
            "actions": [
                {"command": {"device_id": device, "name": "set_hvac_mode", "params": {"mode": "cool"}}}
            ],
        },
    )
    assert response.status_code == 201, response.text
    automation_id = response.json()["automation_id"]
    # the query API folds the home journal on its own: the 201 does not mean it lists the automation yet
    await eventually(
        lambda: automation_listed(query, automation_id), "the automation in the query API", timeout_s=15
    )

    async def ran() -> bool:
        return len((await runs(query, automation_id))["runs"]) >= 1

    await eventually(ran, "the time trigger's run", timeout_s=40, every_s=0.5)
    await asyncio.sleep(2)  # and only once
    (run,) = (await runs(query, automation_id))["runs"]
    instant = datetime.fromisoformat(run["trigger"]["occurred_at"])
    assert run["fired"] and run["trigger"]["type"] == "time"
    assert instant.astimezone(ZoneInfo("America/New_York")).strftime("%H:%M:%S") == at
    assert run["actions"][0]["name"] == "set_hvac_mode"


async def test_for_s_and_time_triggers_are_taken_and_checked(api: httpx.AsyncClient, home: str) -> None:
    device = await register_device(api, home, "thermostat")
    notify = [{"notify": {"message": "x"}}]
    held = {"device_id": device, "key": "ambient_c", "above": 25, "for_s": 60}
    cases = [
        ({"state": held}, [], 201, None),
        ({"time": {"at": "07:30", "days": ["mon", "fri"]}}, [], 201, None),
        ({"time": {"at": "07:30", "days": ["someday"]}}, [], 422, "unknown_day"),
        ({"time": {"at": "7h30"}}, [], 422, "invalid_time"),
        ({"fact": "anomaly.detected"}, [held], 422, "for_s_in_condition"),
        ({"state": {**held, "for_s": 10**9}}, [], 422, "less_than_equal"),
    ]
    for trigger, conditions, status, reason in cases:
        body = {"home_id": home, "name": "n", "trigger": trigger, "conditions": conditions, "actions": notify}
        response = await api.post("/v1/automations", json=body)
        assert response.status_code == status, (trigger, response.text)
        if reason is not None:
            assert response.json()["detail"][0]["type"] == reason, response.text


async def test_the_query_apis_health_says_what_its_home_view_read_at_its_start(
    query: httpx.AsyncClient,
) -> None:
    response = await query.get("/healthz")
    assert response.status_code == 200, response.text
    report = response.json()["followers"]["query-api-homes"]  # the home journal's view, from its snapshot
    assert report["started_from"] in ("snapshot", "first offset (no snapshot yet)"), report
    assert report["gap"] == 0 and report["caught_up_s"] is not None, report
