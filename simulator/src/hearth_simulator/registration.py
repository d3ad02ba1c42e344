"""The demo fleet's devices: stable ids and names, registered with ``"simulated": true`` through the
command API (so the simulator hub plays them and no credentials are issued)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx

from hearth_shared.adapters.http_calls import GatedClient
from hearth_simulator.models import SIM_MODELS

ATTEMPTS = 4  # per device, on a connection error (registering again is harmless: the id is chosen)


def demo_counts() -> dict[str, int]:
    """How many devices of each type the demo home has: as many as the type's model has demo names."""
    return {name: len(model.demo_names) for name, model in SIM_MODELS.items()}


def split_evenly(devices: int) -> dict[str, int]:
    """``devices`` spread over every type the simulator plays (the first types get the remainder)."""
    share, rest = divmod(devices, len(SIM_MODELS))
    return {name: share + (n < rest) for n, name in enumerate(SIM_MODELS)}


def fleet_devices(home_id: str, counts: Mapping[str, int]) -> list[dict[str, Any]]:
    """The registration bodies of a home's simulated devices, ``counts`` by type (ids are stable:
    registering is repeatable)."""
    bodies = []
    for device_type, count in counts.items():
        names = SIM_MODELS[device_type].demo_names
        for n in range(1, count + 1):
            name = names[n - 1] if n <= len(names) else f"{device_type.capitalize()} {n}"
            device_id = f"{home_id}-{device_type}-{n}"
            if len(device_id) > 64:
                raise ValueError(f"home id {home_id!r} is too long to name its devices ({device_id})")
            bodies.append(
                {
                    "device_id": device_id,
                    "home_id": home_id,
                    "type": device_type,
                    "name": name,
                    "simulated": True,
                }
            )
    return bodies


async def register_fleet(
    api_url: str, token: str, home_id: str, counts: Mapping[str, int], *, concurrency: int = 16
) -> list[str]:
    """Register a home's simulated devices through the command API; returns their ids.

    A device registered already (409) is fine, so this can run at every start.
    """
    headers = {"Authorization": f"Bearer {token}"}

    async def register(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
        for attempt in range(ATTEMPTS):
            try:
                response = await client.post("/v1/devices", json=body)
                break
            except httpx.TransportError:  # e.g. a kept-alive connection the server closed meanwhile
                if attempt == ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.5 * 2**attempt)  # the same id again: 409 if the first one landed
        if response.status_code != httpx.codes.CONFLICT:
            response.raise_for_status()
        return str(body["device_id"])

    async with GatedClient(
        base_url=api_url, headers=headers, timeout=30.0, max_connections=concurrency
    ) as client:
        return list(await asyncio.gather(*(register(client, b) for b in fleet_devices(home_id, counts))))


__all__ = ["demo_counts", "fleet_devices", "register_fleet", "split_evenly"]
