"""compose.shards.yaml checked statically, merged onto compose.yaml as `docker compose -f compose.yaml -f
compose.shards.yaml` merges them: the merged file is valid Compose, and it is the two MQTT broker shards
`hearth up --mqtt-brokers 2` runs (each shard a broker with its own broker-access follower and device
gateway, and the command API told both brokers in a shard list its settings read)."""

from __future__ import annotations

import json
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from hearth_shared.adapters.settings import StackSettings
from tests.support.compose_file import ROOT, known_env_names
from tests.unit.test_compose_cluster import SCHEMA, merge

pytestmark = pytest.mark.unit

BASE: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
MERGED: dict[str, Any] = merge(BASE, yaml.safe_load((ROOT / "compose.shards.yaml").read_text()))
SERVICES: dict[str, dict[str, Any]] = MERGED["services"]
SHARD_PARTS = {"0": ("mosquitto", "broker-access", "device-gateway")}
SHARD_PARTS["1"] = ("mosquitto-1", "broker-access-1", "device-gateway-1")


def env(name: str) -> dict[str, str]:
    return {k: str(v) for k, v in SERVICES[name].get("environment", {}).items()}


def test_merged_file_matches_the_compose_specification_schema() -> None:
    schema = json.loads(Path(str(distribution("check-jsonschema").locate_file(SCHEMA))).read_text())
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in Draft202012Validator(schema).iter_errors(MERGED)
    ]
    assert errors == []


def test_the_second_shard_is_a_broker_with_its_own_follower_and_gateway() -> None:
    assert set(SERVICES) - set(BASE["services"]) == set(SHARD_PARTS["1"])
    broker, follower, gateway = SHARD_PARTS["1"]
    assert SERVICES[broker]["image"] == BASE["services"]["mosquitto"]["image"]
    assert SERVICES[broker]["volumes"][1].split(":")[0] in MERGED["volumes"]  # not shard 0's data
    assert SERVICES[follower]["pid"] == f"service:{broker}"  # it signals its own broker
    assert SERVICES[follower]["volumes"] == [SERVICES[broker]["volumes"][1]]
    assert (
        env(follower)["HEARTH_BROKER_ACCESS_SHARD"] == "1"
        and env(follower)["HEARTH_BROKER_ACCESS_MQTT_HOST"] == broker
    )
    assert (
        env(gateway)["HEARTH_DEVICE_GATEWAY_SHARD"] == "1"
        and env(gateway)["HEARTH_DEVICE_GATEWAY_MQTT_HOST"] == broker
    )
    assert (
        env(gateway)["HEARTH_DEVICE_GATEWAY_INSTANCE"]
        != env("device-gateway")["HEARTH_DEVICE_GATEWAY_INSTANCE"]
    )
    for name in (follower, gateway):
        assert set(env(name)) <= known_env_names(), name
        assert SERVICES[name]["depends_on"][broker]["condition"] == "service_healthy"


def test_the_command_api_knows_both_shards_and_tells_devices_each_broker_s_published_port() -> None:
    settings = StackSettings(mqtt_shards=json.loads(env("command-api")["HEARTH_MQTT_SHARDS"]))
    assert settings.mqtt_shards is not None and list(settings.mqtt_shards) == list(SHARD_PARTS)
    for shard, (broker, _, _) in SHARD_PARTS.items():
        [published] = SERVICES[broker]["ports"]
        assert settings.mqtt_shards[shard].device_url == f"mqtt://127.0.0.1:{published.split(':')[0]}"
        assert settings.mqtt_shards[shard].platform_url == f"mqtt://{broker}:1884"
