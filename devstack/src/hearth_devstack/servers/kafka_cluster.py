"""A local KRaft Kafka cluster of N nodes from the same jars (``hearth up --brokers 3``, the chaos tests).

Shape: every node is broker and controller in one JVM, and the controller quorum is all N nodes (static
voters). With 3 nodes that is 3 JVMs, not the 6 that separate controllers would take on a 2-core
laptop, and still any one node may die: 2 of 3 voters keep a metadata quorum and, with replication
factor 3 and min.insync.replicas 2, 2 of 3 replicas keep every partition writable with nothing lost.
Combined nodes are not what a large production cluster runs (a broker's load can slow its controller),
but here the point is surviving the loss of a node, which this shape does.

Each node has its own data dir (``<data_dir>/node-<id>``), ports and log (``kafka-<id>.log``); the
cluster id is made once and kept in ``<data_dir>/cluster-id``, so a restart reuses the formatted dirs.
Node i (from 0) listens on ``port + 2 i`` and its controller on ``controller_port + 2 i`` (9092/9093,
9094/9095, 9096/9097 by default), unless the ports are given one by one.
"""

from __future__ import annotations

import base64
import contextlib
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.servers.kafka_probe import kafka_broker_ports
from hearth_devstack.supervision.process import ManagedProcess, StartupError

PORT_STRIDE = 2  # node i: port + 2 i and controller_port + 2 i, so the defaults interleave


def spread_ports(first: int, nodes: int) -> list[int]:
    return [first + PORT_STRIDE * i for i in range(nodes)]


def new_cluster_id() -> str:
    """A cluster id as Kafka's storage tool makes them: 16 random bytes, URL-safe base64, no padding
    (and, like Kafka's own, never starting with '-', which its command lines would take for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass
class KafkaCluster:
    """N combined KRaft nodes on 127.0.0.1; ``ports[i]`` and ``controller_ports[i]`` are node i+1's."""

    data_dir: Path
    log_dir: Path
    ports: list[int]
    controller_ports: list[int]
    heap: str = "512m"
    nodes: list[KafkaBroker] = field(init=False)

    def __post_init__(self) -> None:
        every = [*self.ports, *self.controller_ports]
        if len(self.ports) != len(self.controller_ports) or len(self.ports) < 3:
            # 2 voters need each other for a quorum: losing either stops the cluster, unlike 1 node alone.
            raise StartupError("Kafka cluster: give 3 or more nodes, each a port and a controller port.")
        if len(set(every)) != len(every):
            raise StartupError(f"Kafka cluster: every broker and controller needs its own port, not {every}.")
        voters = {i + 1: port for i, port in enumerate(self.controller_ports)}
        self.nodes = [
            KafkaBroker(
                data_dir=self.data_dir / f"node-{node_id}",
                port=self.ports[node_id - 1],
                controller_port=controller_port,
                log_dir=self.log_dir,
                heap=self.heap,
                node_id=node_id,
                voters=voters,
            )
            for node_id, controller_port in voters.items()
        ]

    @classmethod
    def spread(
        cls, *, data_dir: Path, log_dir: Path, nodes: int, port: int, controller_port: int
    ) -> KafkaCluster:
        """A cluster whose node i listens on port + 2 i and controller_port + 2 i."""
        return cls(
            data_dir=data_dir,
            log_dir=log_dir,
            ports=spread_ports(port, nodes),
            controller_ports=spread_ports(controller_port, nodes),
        )

    def _cluster_id(self) -> str:
        """Made on first start and kept with the data: the nodes' formatted dirs are bound to it."""
        path = self.data_dir / "cluster-id"
        if not path.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(new_cluster_id() + "\n")
        return path.read_text().strip()

    @property
    def bootstrap(self) -> str:
        """Every node, so a client finds the cluster whichever node is down."""
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def replication_factor(self) -> int:
        return len(self.nodes)

    def node(self, node_id: int) -> KafkaBroker:
        return self.nodes[node_id - 1]

    def processes(self) -> list[ManagedProcess]:
        """One process per node (ports checked, configs written, dirs formatted once); not started.

        Each is healthy once its broker answers; ``wait_formed`` then waits for the whole cluster."""
        cluster_id = self._cluster_id()
        for node in self.nodes:
            node.cluster_id = cluster_id
        return [node.process() for node in self.nodes]

    def wait_formed(self, timeout_s: float) -> None:
        """Until every node lists all N brokers: before that, topics with N replicas cannot be created."""
        want = set(self.ports)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(kafka_broker_ports(port) == want for port in self.ports):
                return
            time.sleep(0.2)
        seen = {port: sorted(kafka_broker_ports(port)) for port in self.ports}
        raise StartupError(f"Kafka cluster did not form within {timeout_s:.0f} s (brokers listed: {seen}).")


def stop_together(nodes: list[ManagedProcess]) -> None:
    """Stop cluster nodes at once, not one after another.

    One by one, the last node alone has no controller quorum: its controlled shutdown waits for a
    controller that never answers, until it is killed (20 s here). Signalled together, 3 nodes stop
    in 3-8 s."""
    for node in nodes:
        if node.proc is not None and node.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.proc.pid, node.stop_signal)
    for node in nodes:
        node.stop()  # waits for it (and kills it if it does not stop in time)
