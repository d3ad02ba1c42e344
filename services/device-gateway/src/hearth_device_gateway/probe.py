"""``python -m hearth_device_gateway.probe``: healthy when the gateways' consumer group of the
device-bound topic is Stable with at least one member, i.e. some gateway is connected and publishes
dispatched commands to devices. compose.yaml runs it as the device gateway's health check."""

from __future__ import annotations

import sys

from hearth_device_gateway.settings import DeviceGatewaySettings
from hearth_shared.adapters.probe import run_probe, stable_group


async def gateway_group_problem() -> str | None:
    settings = DeviceGatewaySettings()
    return await stable_group(settings.stack.kafka_bootstrap_servers, settings.kafka_group())


if __name__ == "__main__":
    sys.exit(run_probe(gateway_group_problem))
