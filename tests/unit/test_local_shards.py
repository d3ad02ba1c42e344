"""`hearth up --mqtt-brokers 2` as the local stack lays it out (nothing started): a Mosquitto per shard on
its own ports and data, sharing the service accounts, each with its broker-access follower and gateway
told their shard, and every service told the shard list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hearth_devstack.local import LocalStack, StackPorts, StartupError
from hearth_shared.adapters.settings import StackSettings

pytestmark = pytest.mark.unit


def test_each_shard_has_its_broker_follower_and_gateway_and_the_services_know_them_all(
    tmp_path: Path,
) -> None:
    stack = LocalStack(home=tmp_path, mqtt_brokers=2, analytics=False)
    first, second = stack.mosquittos
    assert (second.port, second.tls_port, second.platform_port) == (1885, 8884, 1886)
    assert second.data_dir == (tmp_path / "data" / "mosquitto-1").resolve()
    assert second.admin == first.admin and second.simulator == first.simulator  # one set of accounts
    specs = {spec.name: spec for spec in stack.part_specs()}
    assert {"mosquitto", "mosquitto-1", "broker-access-1", "device-gateway-1"} <= set(specs)
    assert "mosquitto-1" in specs["broker-access-1"].depends_on
    assert {"mosquitto-1", "broker-access-1"} <= set(specs["device-gateway-1"].depends_on)
    assert {"device-gateway", "device-gateway-1"} <= set(specs["simulator"].depends_on)

    services = stack.services()
    follower, gateway = (services.part(name)[0] for name in ("broker-access-1", "device-gateway-1"))
    assert (follower.env["HEARTH_BROKER_ACCESS_SHARD"], follower.env["HEARTH_BROKER_ACCESS_MQTT_PORT"]) == (
        "1",
        "1886",
    )
    assert follower.env["HEARTH_BROKER_ACCESS_ACCESS_DIR"] == str(second.access_dir)
    assert (gateway.env["HEARTH_DEVICE_GATEWAY_SHARD"], gateway.env["HEARTH_DEVICE_GATEWAY_MQTT_PORT"]) == (
        "1",
        "1886",
    )
    shards = StackSettings(mqtt_shards=json.loads(gateway.env["HEARTH_MQTT_SHARDS"])).mqtt_shards
    assert shards is not None
    assert {name: shard.device_url for name, shard in shards.items()} == {
        "0": "mqtt://127.0.0.1:1883",
        "1": "mqtt://127.0.0.1:1885",
    }
    assert "HEARTH_BROKER_ACCESS_SHARD" not in services.part("broker-access")[0].env  # shard 0: as before


def test_a_second_broker_s_port_that_clashes_is_named(tmp_path: Path) -> None:
    stack = LocalStack(home=tmp_path, ports=StackPorts(command_api=1885), mqtt_brokers=2, analytics=False)
    with pytest.raises(StartupError, match="mqtt 1"):
        stack.check_ports()
