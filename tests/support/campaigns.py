"""Starting a firmware campaign in a test, once the driver has recorded it.

A campaign driver that has just started takes requests before its view of the journal has caught up,
and refuses (``bad_target``, in its log only) a campaign over a device it has not read yet: seen as
"campaign driver: ready (0 campaigns, 0 devices)" then the refusal (a driver defect, reported). A
refused start records nothing, so the test starts again until one is recorded.
"""

from __future__ import annotations

from typing import Any

import httpx


async def start_recorded_campaign(admin_api: httpx.AsyncClient, body: dict[str, Any], tries: int = 12) -> str:
    """``POST /v1/campaigns`` with ``body`` until the driver records the start; the campaign's id."""
    for _ in range(tries):
        answer = await admin_api.post("/v1/campaigns", json=body)
        assert answer.status_code == 201, answer.text
        campaign_id: str = answer.json()["campaign_id"]
        if (await admin_api.get(f"/v1/campaigns/{campaign_id}", params={"wait_s": 5})).status_code == 200:
            return campaign_id
    raise AssertionError(f"the campaign driver refused {tries} starts (see its log)")
