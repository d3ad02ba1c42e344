"""Commands through the command API as a client sends them (name, params, and the optional wait,
Idempotency-Key and expiry), and a command's view from the query API once it has ended."""

from __future__ import annotations

from typing import Any

import httpx

from hearth_shared.schema.events import TERMINAL_STATUSES
from tests.support.waiting import poll_until


async def send(
    api: httpx.AsyncClient,
    device_id: str,
    name: str,
    params: dict[str, Any] | None = None,
    *,
    wait: str | None = None,
    timeout_s: float = 20,
    key: str | None = None,
    expires_in_s: float | None = None,
) -> httpx.Response:
    body: dict[str, Any] = {"name": name, "params": params or {}}
    if expires_in_s is not None:
        body["expires_in_s"] = expires_in_s
    query: dict[str, str | float] = {"wait": wait, "timeout_s": timeout_s} if wait else {}
    headers = {"Idempotency-Key": key} if key else {}
    return await api.post(f"/v1/devices/{device_id}/commands", json=body, params=query, headers=headers)


async def final_command(query: httpx.AsyncClient, command_id: str, timeout_s: float = 30) -> dict[str, Any]:
    """The command's view once it reached a terminal status (the read model is eventually consistent)."""
    response = await poll_until(
        lambda: query.get(f"/v1/commands/{command_id}"),
        lambda r: r.status_code == 200 and r.json()["status"] in TERMINAL_STATUSES,
        f"command {command_id} to end",
        timeout_s=timeout_s,
    )
    return dict(response.json())
