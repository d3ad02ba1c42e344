"""A device-gateway process of a test's own, on the session's MQTT broker and the test's topics, started
and awaited until healthy (the caller stops it): for the tests that kill, restart or run several
gateways beside the session's platform."""

from __future__ import annotations

from pathlib import Path

from hearth_devstack.local import Services
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_devstack.supervision.process import ManagedProcess
from hearth_shared.adapters.settings import StackSettings


def gateway(
    stack: StackSettings,
    mosquitto: MosquittoBroker,
    tmp_path: Path,
    instance: str,
    env: dict[str, str] | None = None,
) -> ManagedProcess:
    services = Services(
        stack,
        logs=tmp_path / instance,
        data=tmp_path / f"{instance}-data",
        mqtt_platform_port=mosquitto.platform_port,
        mqtt_password=mosquitto.admin.password,
        extra_env={"HEARTH_DEVICE_GATEWAY_INSTANCE": instance, **(env or {})},
    )
    part, timeout_s = services.part("device-gateway")
    part.start()
    part.wait_healthy(timeout_s)
    return part
