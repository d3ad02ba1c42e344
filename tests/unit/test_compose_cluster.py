"""compose.cluster.yaml checked statically, merged onto compose.yaml as `docker compose -f compose.yaml -f
compose.cluster.yaml` merges them: the merged file is valid Compose, and it is the 3-node KRaft cluster
`hearth up --brokers 3` runs (each node broker and controller, the same three voters and cluster id,
3 replicas and min.insync.replicas 2, every Hearth service told all three nodes and waiting for them)."""

from __future__ import annotations

import json
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from hearth_devstack.servers.kafka import OFFSETS_RETENTION_MINUTES
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.topics import min_insync_replicas

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = "check_jsonschema/builtin_schemas/vendor/compose-spec.json"
NODES = {"kafka": 1, "kafka-2": 2, "kafka-3": 3}
REPLICAS = 3


def merge(base: Any, override: Any, path: tuple[str, ...] = ()) -> Any:
    """Compose's merge of two files, for what these files use: mappings merge key by key (environment
    too), ``volumes`` of a service replace the mount with the same target, other sequences append."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = merge(base[key], value, (*path, key)) if key in base else value
        return merged
    if isinstance(base, list) and isinstance(override, list):
        if len(path) == 3 and path[0] == "services" and path[2] == "volumes":
            targets = {str(v).split(":")[1] for v in override}
            return [v for v in base if str(v).split(":")[1] not in targets] + override
        return base + [v for v in override if v not in base]
    return override


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / name).read_text())
    return data


BASE = load("compose.yaml")
MERGED = merge(BASE, load("compose.cluster.yaml"))
SERVICES: dict[str, dict[str, Any]] = MERGED["services"]


def env(name: str) -> dict[str, str]:
    return {k: str(v) for k, v in SERVICES[name].get("environment", {}).items()}


def test_merged_file_matches_the_compose_specification_schema() -> None:
    schema = json.loads(Path(str(distribution("check-jsonschema").locate_file(SCHEMA))).read_text())
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in Draft202012Validator(schema).iter_errors(MERGED)
    ]
    assert errors == []


def test_override_only_adds_brokers_and_changes_known_services() -> None:
    added = set(SERVICES) - set(BASE["services"])
    assert added == {"kafka-2", "kafka-3"}


def test_three_nodes_form_one_quorum() -> None:
    voters = {env(name)["KAFKA_CONTROLLER_QUORUM_VOTERS"] for name in NODES}
    assert voters == {",".join(f"{node}@{name}:9093" for name, node in NODES.items())}
    assert len({env(name)["CLUSTER_ID"] for name in NODES}) == 1
    for name, node in NODES.items():
        e = env(name)
        assert e["KAFKA_NODE_ID"] == str(node)
        assert e["KAFKA_PROCESS_ROLES"] == "broker,controller"
        assert f"INTERNAL://{name}:9092" in e["KAFKA_ADVERTISED_LISTENERS"]
        assert SERVICES[name].get("hostname", name) == name
        assert SERVICES[name]["image"] == BASE["services"]["kafka"]["image"]


def test_each_node_keeps_its_own_data_and_publishes_its_advertised_port() -> None:
    volumes = [SERVICES[name]["volumes"] for name in NODES]
    assert all(len(v) == 1 for v in volumes)
    sources = {v[0].split(":")[0] for v in volumes}
    assert len(sources) == 3 and "kafka-data" not in sources  # never the one-node volume
    assert sources <= set(MERGED["volumes"])
    published = set()
    for name in NODES:
        [port] = SERVICES[name]["ports"]
        host, container = str(port).split(":")
        assert container == "19092"
        assert f"EXTERNAL://127.0.0.1:{host}" in env(name)["KAFKA_ADVERTISED_LISTENERS"]
        published.add(int(host))
    assert published == {9092, 9094, 9096}  # as `hearth up --brokers 3`: port + 2 i


def test_every_topic_gets_three_replicas_and_two_in_sync() -> None:
    min_isr = str(min_insync_replicas(REPLICAS))
    for name in NODES:
        e = env(name)
        for setting in (
            "DEFAULT_REPLICATION_FACTOR",
            "OFFSETS_TOPIC_REPLICATION_FACTOR",
            "TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
            "SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR",
        ):
            assert e[f"KAFKA_{setting}"] == str(REPLICAS), (name, setting)
        for setting in (
            "MIN_INSYNC_REPLICAS",
            "TRANSACTION_STATE_LOG_MIN_ISR",
            "SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR",
        ):
            assert e[f"KAFKA_{setting}"] == min_isr, (name, setting)
        assert e["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"
        assert e["KAFKA_OFFSETS_RETENTION_MINUTES"] == OFFSETS_RETENTION_MINUTES  # as `hearth up`'s brokers


def test_hearth_services_know_every_node_and_the_replication_factor() -> None:
    ours = {name for name, svc in SERVICES.items() if "HEARTH_KAFKA_BOOTSTRAP_SERVERS" in env(name)}
    assert ours == {n for n, svc in BASE["services"].items() if "HEARTH_KAFKA_BOOTSTRAP_SERVERS" in env(n)}
    for name in ours:
        settings = StackSettings.model_validate(
            {
                k.removeprefix("HEARTH_").lower(): v
                for k, v in env(name).items()
                if k in ("HEARTH_KAFKA_BOOTSTRAP_SERVERS", "HEARTH_KAFKA_REPLICATION_FACTOR")
            }
        )
        assert settings.kafka_bootstrap_servers.split(",") == [f"{n}:9092" for n in NODES], name
        assert settings.topics.replication_factor == REPLICAS, name
        assert all(spec.replication_factor == REPLICAS for spec in settings.topics.specs())
        depends = SERVICES[name].get("depends_on", {})
        if "kafka" in depends:  # whoever waits for the broker waits for all three
            assert all(depends.get(n, {}).get("condition") == "service_healthy" for n in NODES), name
