"""The fleet simulator in the test's own event loop, playing only the test's devices (the platform's
journal holds other tests' simulated devices too), as a hub over MQTT with the simulator's account.
``models``: a device's model made by the test (its physics chosen), instead of one drawn from its id."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_simulator.fleet import Fleet, FleetOptions, MqttEndpoint
from hearth_simulator.sim_device import SimDevice
from tests.support.platform import Platform


class HomeFleet(Fleet):
    """The simulator, playing only ``devices``."""

    def __init__(
        self,
        platform: Platform,
        devices: set[str],
        options: FleetOptions,
        mqtt: MqttEndpoint,
        models: Mapping[str, Callable[[float], SimDevice]] | None = None,
    ) -> None:
        super().__init__(
            platform.settings.kafka_bootstrap_servers, platform.settings.topics, options, mqtt=mqtt
        )
        self.devices = devices
        self.models = dict(models or {})

    def add_device(self, device_id: str, device_type: str, now: float) -> bool:
        return device_id in self.devices and super().add_device(device_id, device_type, now)

    def _new_model(self, device_id: str, device_type: str, now: float) -> SimDevice:
        made = self.models.get(device_id)
        return made(now) if made else super()._new_model(device_id, device_type, now)


def simulator_endpoint(mosquitto: MosquittoBroker) -> MqttEndpoint:
    """Where the hub connects: the broker's platform listener, the simulator's account."""
    account = mosquitto.simulator
    return MqttEndpoint(port=mosquitto.platform_port, username=account.username, password=account.password)


@contextlib.asynccontextmanager
async def playing(
    platform: Platform,
    devices: set[str],
    mqtt: MqttEndpoint,
    *,
    rate: float,
    models: Mapping[str, Callable[[float], SimDevice]] | None = None,
    **options: Any,
) -> AsyncIterator[asyncio.Task[None]]:
    """Run the fleet in this event loop until the block ends (``options``: ``FleetOptions``' faults)."""
    group = f"home-fleet-{uuid.uuid4().hex[:8]}"
    fleet = HomeFleet(platform, devices, FleetOptions(rate=rate, client_id=group, **options), mqtt, models)
    stop = asyncio.Event()
    task = asyncio.create_task(fleet.run(stop))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert fleet.stats["reports"] > 0, dict(fleet.stats)
