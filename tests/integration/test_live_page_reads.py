"""The query API's reads made for the live page, on the real stack: ``GET /v1/campaigns`` (admin only)
shows a campaign exactly as the command API's ``GET /v1/campaigns`` does (both fold the campaigns topic
with ``hearth_shared.adapters.campaign_feed``), and ``GET /v1/homes/{id}/schedules`` lists a home's schedules
as the per-device ``GET .../schedule`` shows each, and another home's as a 404."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from hearth_shared.domain.schedule import DAYS
from tests.support.campaigns import start_recorded_campaign
from tests.support.platform import Platform
from tests.support.registration import register_device
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_the_query_api_shows_campaigns_as_the_command_api_does(
    platform: Platform, home: str, admin_api: httpx.AsyncClient, query: httpx.AsyncClient
) -> None:
    assert (await query.get("/v1/campaigns")).status_code == 403  # a home token
    light = await register_device(admin_api, home, "light")  # never heard from: its job stays "sent"
    body = {
        "device_type": "light",
        "version": "3.1.0",
        "url": "https://firmware.example/light-3.1.0.bin",
        "sha256": "c4" * 32,
        "target": {"device_ids": [light]},
        "waves": [100],
        "soak_s": 0,
        "abort": {"max_failed_pct": 100, "max_offline_pct": 100, "max_anomaly_ratio": 1000},
        "job_timeout_s": 600,
    }

    campaign_id = await start_recorded_campaign(admin_api, body)
    try:
        async with platform.client(platform.query_api) as admin_query:
            seen: dict[str, list[dict[str, Any]]] = {}

            async def shown_alike() -> bool:
                ours = (await admin_query.get("/v1/campaigns")).json()["campaigns"]
                theirs = (await admin_api.get("/v1/campaigns")).json()
                seen["query"] = [c for c in ours if c["campaign_id"] == campaign_id]
                seen["command"] = [c for c in theirs if c["campaign_id"] == campaign_id]
                return bool(seen["query"]) and seen["query"] == seen["command"]

            try:
                await eventually(shown_alike, "the campaign alike on both APIs", timeout_s=60)
            except AssertionError as timed_out:
                raise AssertionError(f"{timed_out}: {seen}") from None

            async def sent() -> bool:
                return await shown_alike() and seen["query"][0]["jobs"] == {"sent": 1}

            try:
                await eventually(sent, "the campaign's one job sent", timeout_s=60)
            except AssertionError as timed_out:
                raise AssertionError(f"{timed_out}: {seen}") from None
            running = (await admin_query.get("/v1/campaigns", params={"status": "running"})).json()
            assert campaign_id in [c["campaign_id"] for c in running["campaigns"]]
            [wave] = next(c for c in running["campaigns"] if c["campaign_id"] == campaign_id)["waves"]
            assert (wave["size"], wave["state"], wave["jobs"]) == (1, "running", {"sent": 1})
            completed = (await admin_query.get("/v1/campaigns", params={"status": "completed"})).json()
            assert campaign_id not in [c["campaign_id"] for c in completed["campaigns"]]
            bad = await admin_query.get("/v1/campaigns", params={"status": "paused"})
            assert bad.status_code == 422
    finally:
        await admin_api.post(f"/v1/campaigns/{campaign_id}/abort", json={"reason": "test over"})


async def test_a_homes_schedules_are_listed_as_each_devices_schedule_shows(
    platform: Platform, home: str, api: httpx.AsyncClient, query: httpx.AsyncClient
) -> None:
    assert (await query.get(f"/v1/homes/{home}/schedules")).json() == {"schedules": []}
    scheduled = [await register_device(api, home, "thermostat") for _ in range(2)]
    await register_device(api, home, "thermostat")  # one without a schedule: not listed
    for i, device_id in enumerate(scheduled):
        program = [
            {
                "days": list(DAYS),
                "at": (datetime.now(UTC) + timedelta(hours=6 + i)).strftime("%H:00"),  # none fires meanwhile
                "command": {"name": "set_target_temperature", "params": {"target_c": 20.0 + i}},
            }
        ]
        answer = await api.put(f"/v1/devices/{device_id}/schedule", json={"program": program})
        assert answer.status_code in (200, 202), answer.text

    listed: list[dict[str, Any]] = []

    async def both_listed() -> bool:
        listed[:] = (await query.get(f"/v1/homes/{home}/schedules", params={"count": 2})).json()["schedules"]
        return len(listed) == 2

    await eventually(both_listed, "both schedules in the home's list", timeout_s=30)
    assert [s["device_id"] for s in listed] == sorted(scheduled)
    for schedule in listed:
        one = (await query.get(f"/v1/devices/{schedule['device_id']}/schedule", params={"count": 2})).json()
        assert schedule == one
        assert len(schedule["next"]) == 2
    async with platform.client(platform.query_api, f"{home}-other") as stranger:
        answer = await stranger.get(f"/v1/homes/{home}/schedules")
        assert answer.status_code == 404, answer.text
