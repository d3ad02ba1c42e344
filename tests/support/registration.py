"""Registering a device through the command API, as a home does it: with the home's token and no
``device_id`` (the server assigns ``{type}-{random}``; only admin tokens choose ids)."""

from __future__ import annotations

import httpx


async def register_device(
    api: httpx.AsyncClient, home: str, device_type: str, name: str = "t", *, simulated: bool = False
) -> str:
    """Register with ``api`` (a client holding the home's token or an admin token); the new device's id."""
    body = {"home_id": home, "type": device_type, "name": name, "simulated": simulated}
    response = await api.post("/v1/devices", json=body)
    assert response.status_code == 201, response.text
    device_id: str = response.json()["device_id"]
    assert device_id.startswith(f"{device_type}-")
    return device_id
