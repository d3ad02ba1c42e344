"""The local Kafka cluster's shape and the replication settings, checked without starting a JVM: node
configs (ids, one quorum, replicas of internal topics), ports, the cluster id, topic specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hearth_devstack.local import LocalStack, Services, StackPorts
from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.servers.kafka_cluster import KafkaCluster, new_cluster_id, spread_ports
from hearth_devstack.supervision.process import StartupError
from hearth_shared.adapters.kafka import _raise_topic_errors
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.topics import Topics, min_insync_replicas

pytestmark = pytest.mark.unit


def properties(broker: KafkaBroker) -> dict[str, str]:
    lines = broker._server_properties().splitlines()
    return dict(line.split("=", 1) for line in lines)


def three(tmp_path: Path) -> KafkaCluster:
    return KafkaCluster.spread(
        data_dir=tmp_path / "k", log_dir=tmp_path, nodes=3, port=20000, controller_port=20001
    )


def test_three_nodes_share_one_quorum_and_replicate_internal_topics(tmp_path: Path) -> None:
    cluster = three(tmp_path)
    configs = [properties(node) for node in cluster.nodes]
    assert [c["node.id"] for c in configs] == ["1", "2", "3"]
    assert {c["controller.quorum.voters"] for c in configs} == {
        "1@127.0.0.1:20001,2@127.0.0.1:20003,3@127.0.0.1:20005"
    }
    assert all("controller.quorum.bootstrap.servers" not in c for c in configs)
    assert [c["advertised.listeners"] for c in configs] == [
        f"PLAINTEXT://127.0.0.1:{port}" for port in (20000, 20002, 20004)
    ]
    assert len({c["log.dirs"] for c in configs}) == 3
    for c in configs:
        assert c["process.roles"] == "broker,controller"
        assert c["offsets.topic.replication.factor"] == c["transaction.state.log.replication.factor"] == "3"
        assert c["default.replication.factor"] == "3"
        assert c["transaction.state.log.min.isr"] == c["min.insync.replicas"] == "2"
        assert c["unclean.leader.election.enable"] == "false"
    assert cluster.bootstrap == "127.0.0.1:20000,127.0.0.1:20002,127.0.0.1:20004"
    assert [node.name for node in cluster.nodes] == ["kafka-1", "kafka-2", "kafka-3"]


def test_one_broker_stays_a_standalone_node(tmp_path: Path) -> None:
    broker = KafkaBroker(data_dir=tmp_path, log_dir=tmp_path, port=20000, controller_port=20001)
    c = properties(broker)
    assert c["controller.quorum.bootstrap.servers"] == "127.0.0.1:20001"
    assert "controller.quorum.voters" not in c
    assert c["offsets.topic.replication.factor"] == c["min.insync.replicas"] == "1"
    assert (broker.name, broker.replication_factor, broker.bootstrap) == ("kafka", 1, "127.0.0.1:20000")


def test_the_cluster_id_is_made_once_and_kept(tmp_path: Path) -> None:
    first = three(tmp_path)._cluster_id()
    assert first == three(tmp_path)._cluster_id()
    assert first != three(tmp_path / "other")._cluster_id()
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200 and all(len(i) == 22 and not i.startswith("-") for i in ids)


def test_constructing_a_cluster_writes_nothing(tmp_path: Path) -> None:
    three(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_ports_that_overlap_or_too_few_nodes_are_refused(tmp_path: Path) -> None:
    assert spread_ports(9092, 3) == [9092, 9094, 9096]
    with pytest.raises(StartupError, match="its own port"):  # node 2's broker on node 1's controller
        KafkaCluster.spread(data_dir=tmp_path, log_dir=tmp_path, nodes=3, port=20000, controller_port=20002)
    with pytest.raises(StartupError, match="3 or more"):
        KafkaCluster.spread(data_dir=tmp_path, log_dir=tmp_path, nodes=2, port=20000, controller_port=20001)


def test_the_stack_names_a_cluster_port_that_clashes_with_another_part(tmp_path: Path) -> None:
    ports = StackPorts(kafka=20000, kafka_controller=20001, postgres=20004, redis=20010)
    stack = LocalStack(home=tmp_path, ports=ports, brokers=3, simulate=False, analytics=False)
    with pytest.raises(StartupError, match=r"postgres.*kafka-3|kafka-3.*postgres"):
        stack.check_ports()
    assert stack.settings.kafka_replication_factor == 3
    assert stack.settings.kafka_bootstrap_servers == "127.0.0.1:20000,127.0.0.1:20002,127.0.0.1:20004"


def test_topics_get_the_replication_factor_and_two_in_sync_replicas() -> None:
    assert [min_insync_replicas(n) for n in (1, 2, 3, 5)] == [1, 2, 2, 2]
    with pytest.raises(ValueError, match="replication factor must be at least 1"):
        min_insync_replicas(0)
    for spec in Topics("x", 3).specs():
        assert (spec.replication_factor, spec.config["min.insync.replicas"]) == (3, "2"), spec.name
    for spec in Topics("x").specs():
        assert (spec.replication_factor, spec.config["min.insync.replicas"]) == (1, "1"), spec.name
    journal = next(s for s in Topics("x", 3).specs() if s.name == "x.journal")
    assert journal.config["retention.ms"] == "-1"


def test_services_are_told_the_replication_factor(tmp_path: Path) -> None:
    settings = StackSettings(kafka_bootstrap_servers="a:1,b:2,c:3", kafka_replication_factor=3)
    env = Services(settings, logs=tmp_path, data=tmp_path).env()
    assert env["HEARTH_KAFKA_REPLICATION_FACTOR"] == "3"
    assert env["HEARTH_KAFKA_BOOTSTRAP_SERVERS"] == "a:1,b:2,c:3"


def test_a_home_keeps_the_kafka_it_was_made_with(tmp_path: Path) -> None:
    LocalStack(home=tmp_path, brokers=3).check_kafka_shape()  # a new home: any shape
    (tmp_path / "data" / "kafka").mkdir(parents=True)  # what a one-broker start leaves
    LocalStack(home=tmp_path, brokers=1).check_kafka_shape()
    with pytest.raises(StartupError, match="--brokers 1"):
        LocalStack(home=tmp_path, brokers=3).check_kafka_shape()
    other = tmp_path / "other"
    for node in (1, 2, 3):
        (other / "data" / "kafka-cluster" / f"node-{node}").mkdir(parents=True)
    LocalStack(home=other, brokers=3).check_kafka_shape()
    with pytest.raises(StartupError, match="--brokers 3"):
        LocalStack(home=other, brokers=1).check_kafka_shape()


def test_a_topic_the_broker_refused_is_an_error_and_one_that_exists_is_not() -> None:
    _raise_topic_errors([("x.journal", 0, None), ("x.inbox", 36, "Topic 'x.inbox' already exists.")])
    with pytest.raises(RuntimeError, match=r"x.journal: 38 Replication factor: 3 larger than available"):
        _raise_topic_errors([("x.journal", 38, "Replication factor: 3 larger than available brokers: 1.")])
