"""The live page's fixtures: a command API that lets the page call it, and a thermostat played by the
test. (The browser is tests/conftest.py's ``browser``, one for the whole session.)"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from hearth_devstack.launch.service_processes import Services, services_running
from hearth_devstack.supervision.ports import free_port
from tests.support.device_link import DeviceLink
from tests.support.platform import Platform


@pytest.fixture(scope="session")
def command_api(platform: Platform, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A command API process beside the platform's whose CORS origins hold the query API (the page's
    origin; the platform's query API runs on a free port, not the default 8001). One for the session,
    like the platform it stands beside: every live page test runs on the browser's worker."""
    logs = tmp_path_factory.mktemp("cors-command-api")
    port = free_port()
    env = {"HEARTH_COMMAND_API_CORS_ORIGINS": json.dumps([platform.query_api])}
    services = Services(platform.settings, logs=logs, data=logs, command_api_port=port, extra_env=env)
    with services_running(services, ["command-api"]):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
async def thermostat(platform: Platform, command_api: str) -> AsyncIterator[tuple[str, str]]:
    """(home, device_id): a registered thermostat played by this test as a real one behaves: it reports
    every 2 s (so it stays online), and acknowledges and carries out every command it is sent."""
    home = f"home-{uuid.uuid4().hex[:8]}"
    device_id = f"thermostat-{uuid.uuid4().hex[:8]}"
    state = {
        "ambient_c": 19.5,
        "humidity_pct": 41.0,
        "hvac_mode": "heat",
        "hvac_action": "idle",
        "target_c": 19.0,
    }
    async with DeviceLink(platform.settings) as link:  # first: a device speaks once registered after it
        async with platform.client(command_api) as api:  # an admin token: the test chooses the id
            body = {"device_id": device_id, "home_id": home, "type": "thermostat", "name": "Living room"}
            assert (await api.post("/v1/devices", json=body)).status_code == 201

        async def play() -> None:
            while True:
                await link.report(device_id, state)
                try:
                    command = await link.next_command(device_id, timeout_s=2)
                except TimeoutError:
                    continue
                await link.ack(device_id, command.command_id)
                params = command.params
                state.update({"hvac_mode": params["mode"]} if "mode" in params else params)
                state["hvac_action"] = "heating"

        device = asyncio.create_task(play())
        yield home, device_id
        device.cancel()
