"""The demo fleet's devices: stable ids and names, registered with ``"simulated": true`` through the
command API (so the simulator hub plays them and no credentials are issued)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from hearth.simulator.models import SimLock, SimThermostat

_THERMOSTAT_NAMES = ("Living room", "Bedroom", "Kitchen", "Office", "Nursery", "Guest room", "Basement")
_LOCK_NAMES = ("Front door", "Back door", "Garage", "Patio door", "Side gate")


def fleet_devices(home_id: str, thermostats: int, locks: int) -> list[dict[str, Any]]:
    """The registration bodies of a home's simulated devices (ids are stable: registering is repeatable)."""
    bodies = []
    for device_type, count, names in (
        (SimThermostat.device_type, thermostats, _THERMOSTAT_NAMES),
        (SimLock.device_type, locks, _LOCK_NAMES),
    ):
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
    api_url: str, token: str, home_id: str, thermostats: int, locks: int, *, concurrency: int = 16
) -> list[str]:
    """Register a home's simulated devices through the command API; returns their ids.

    A device registered already (409) is fine, so this can run at every start.
    """
    headers = {"Authorization": f"Bearer {token}"}
    gate = asyncio.Semaphore(concurrency)

    async def register(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
        async with gate:
            response = await client.post("/v1/devices", json=body)
        if response.status_code != httpx.codes.CONFLICT:
            response.raise_for_status()
        return str(body["device_id"])

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=api_url, headers=headers, timeout=30.0, limits=limits) as client:
        return list(
            await asyncio.gather(*(register(client, b) for b in fleet_devices(home_id, thermostats, locks)))
        )


__all__ = ["fleet_devices", "register_fleet"]
