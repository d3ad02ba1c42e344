"""The MQTT broker shards of the Kubernetes manifests (the ha overlay runs two), rendered as
test_deploy.py renders them: Mosquitto as a StatefulSet per shard whose broker-access sidecar keeps that
shard alone, gateways per shard on that shard's broker, and the command API told every shard."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.shards import DEFAULT_SHARD
from tests.unit.test_deploy import env_of, find

pytestmark = pytest.mark.unit

GATEWAYS = {"0": "device-gateway", "1": "device-gateway-shard-1"}
POD_INDEX = "metadata.labels['apps.kubernetes.io/pod-index']"


def named(workload: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [c for c in workload["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return dict(found)


def test_each_shard_of_the_ha_overlay_is_a_broker_its_follower_and_its_gateways() -> None:
    stack = find("ha", "ConfigMap", "hearth-stack")["data"]
    shards = StackSettings(mqtt_shards=json.loads(stack["HEARTH_MQTT_SHARDS"])).mqtt_shards
    assert shards is not None and list(shards) == list(GATEWAYS)
    for shard, gateway_name in GATEWAYS.items():
        broker = find("ha", "StatefulSet", f"mosquitto-shard-{shard}")
        assert broker["spec"]["replicas"] == 1  # one broker per shard, always
        follower = env_of("ha", named(broker, "broker-access"))
        assert follower.get("HEARTH_BROKER_ACCESS_SHARD", DEFAULT_SHARD) == shard
        assert follower["HEARTH_BROKER_ACCESS_MQTT_HOST"] == f"mosquitto-shard-{shard}"
        gateways = find("ha", "StatefulSet", gateway_name)
        [container] = gateways["spec"]["template"]["spec"]["containers"]
        gateway = env_of("ha", container)
        assert gateway.get("HEARTH_DEVICE_GATEWAY_SHARD", DEFAULT_SHARD) == shard
        assert gateway["HEARTH_DEVICE_GATEWAY_MQTT_HOST"] == f"mosquitto-shard-{shard}-platform"
        assert gateways["spec"]["replicas"] == 2
        # Each gateway takes a device slice: its pod's index, of as many as there are replicas.
        assert gateway["HEARTH_DEVICE_GATEWAY_SLICES"] == "2"
        assert gateway["HEARTH_DEVICE_GATEWAY_SLICE"] == {"fieldRef": {"fieldPath": POD_INDEX}}
        assert shards[shard].platform_url == f"mqtt://mosquitto-shard-{shard}-platform:1884"
        find("ha", "Service", f"mosquitto-shard-{shard}-devices")  # where its devices connect
