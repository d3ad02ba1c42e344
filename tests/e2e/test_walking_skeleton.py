"""The walking skeleton: a device registered through the command API shows up in the query API, having
passed through the inbox, the device actor, the journal and the projector, on real Kafka, PostgreSQL
and Redis."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.support.platform import Platform
from tests.support.registration import register_device
from tests.support.waiting import poll_until

pytestmark = pytest.mark.e2e


def found(response: httpx.Response) -> bool:
    return response.status_code == 200


async def test_registered_thermostat_appears_in_the_query_api(platform: Platform) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    async with (
        platform.client(platform.command_api, home) as api,
        platform.client(platform.query_api, home) as q,
    ):
        created = await api.post("/v1/devices", json={"home_id": home, "type": "thermostat", "name": "Hall"})
        assert created.status_code == 201, created.text
        device_id = created.json()["device_id"]
        assert device_id.startswith("thermostat-")  # a home token does not choose it: the server does
        assert created.json()["version"] == 1

        # Version 3: the registration's facts are device.registered, device.credentials_issued and, once
        # its broker has loaded the credential (the answer waited for it), device.credentials_loaded.
        twin = await poll_until(
            lambda: q.get(f"/v1/devices/{device_id}", params={"min_version": 3}),
            found,
            f"version 3 of {device_id} in the query API\n{platform.logs()}",
            timeout_s=30,
        )
        body = twin.json()
        assert (body["home_id"], body["type"], body["name"], body["version"]) == (
            home,
            "thermostat",
            "Hall",
            3,
        )

        history = await q.get(f"/v1/devices/{device_id}/events", params={"min_version": 3})
        types = [e["type"] for e in history.json()["items"]]
        assert types == ["device.registered", "device.credentials_issued", "device.credentials_loaded"]

        listed = await q.get("/v1/devices", params={"home_id": home})
        assert [d["device_id"] for d in listed.json()["items"]] == [device_id]


async def test_an_admin_registering_a_taken_id_is_a_conflict(platform: Platform) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    body = {
        "device_id": f"lock-{uuid.uuid4().hex[:8]}",
        "home_id": home,
        "type": "lock",
        "name": "Front door",
    }
    async with platform.client(platform.command_api) as admin:
        assert (await admin.post("/v1/devices", json=body)).status_code == 201
        again = await admin.post("/v1/devices", json=body)
        assert again.status_code == 409
        assert "already registered" in again.json()["detail"]


async def test_bad_registration_says_what_is_wrong(platform: Platform) -> None:
    async with platform.client(platform.command_api, "h1") as api:
        response = await api.post("/v1/devices", json={"home_id": "h1", "type": "toaster", "name": "x"})
    assert response.status_code == 422
    assert "unknown device type 'toaster'" in response.text


async def test_no_token_is_401_and_another_home_is_404(platform: Platform) -> None:
    home, other = f"home-{uuid.uuid4().hex[:8]}", f"home-{uuid.uuid4().hex[:8]}"
    async with platform.client(platform.command_api, home) as api:
        device_id = await register_device(api, home, "thermostat", name="Hall")
    async with httpx.AsyncClient(base_url=platform.query_api) as anonymous:
        assert (await anonymous.get(f"/v1/devices/{device_id}")).status_code == 401
    async with (
        platform.client(platform.query_api, home) as mine,
        platform.client(platform.query_api, other) as q,
    ):
        await poll_until(
            lambda: mine.get(f"/v1/devices/{device_id}"), found, "the device in its home", timeout_s=30
        )
        assert (await q.get(f"/v1/devices/{device_id}")).status_code == 404
