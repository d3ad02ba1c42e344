"""A real Apache Kafka broker for the local stack, run from the jars on Maven Central (no Docker).

``ensure_kafka_jars`` resolves the broker's classpath once with Maven into ``.hearth/kafka/<version>/libs``;
``KafkaBroker`` writes a KRaft configuration (broker and controller in one JVM), formats its log dir the
first time and returns the ``ManagedProcess`` that runs it. Alone it is a single-node cluster (a
dynamic quorum of itself); given ``voters`` it is one node of a cluster whose controller quorum is
those nodes (static voters, see kafka_cluster.py), and internal topics get replicas on every voter.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from hearth_devstack.servers.kafka_probe import kafka_answers
from hearth_devstack.supervision.ports import free_port, require_free_port
from hearth_devstack.supervision.process import ManagedProcess, StartupError
from hearth_devstack.workspace import REPO_ROOT
from hearth_shared.adapters.topics import min_insync_replicas

KAFKA_VERSION = "4.4.0"

_HERE = Path(__file__).resolve().parent
POM = _HERE / "kafka-pom.xml"
LOG4J_CONFIG = _HERE / "kafka-log4j2.xml"
DEFAULT_ROOT = REPO_ROOT / ".hearth"
_COMPLETE = ".complete"

OFFSETS_RETENTION_MINUTES = str(365 * 24 * 60)  # compose*.yaml and deploy/base/kafka.yaml set the same


def ensure_kafka_jars(root: Path = DEFAULT_ROOT) -> Path:
    """The directory holding every jar the broker and the storage tool need; resolved once, then cached."""
    libs = root / "kafka" / KAFKA_VERSION / "libs"
    if (libs / _COMPLETE).exists():
        return libs
    if shutil.which("mvn") is None:
        raise StartupError("Kafka: `mvn` (Apache Maven) is needed once to fetch the Kafka jars; install it.")
    print(f"resolving Kafka {KAFKA_VERSION} jars from Maven Central (once)...", flush=True)
    started = time.monotonic()
    libs.parent.mkdir(parents=True, exist_ok=True)
    # Resolve into a fresh directory and move it in place at the end: an interrupted run never leaves
    # half a classpath behind, and two runs at once do not write into each other.
    partial = Path(tempfile.mkdtemp(prefix="libs.", dir=libs.parent))
    properties = [f"-Dkafka.version={KAFKA_VERSION}", f"-DoutputDirectory={partial}"]
    argv = ["mvn", "-B", "-q", "-f", str(POM), "dependency:copy-dependencies", *properties]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        output = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
        raise StartupError(f"Kafka: resolving the jars with Maven failed ({' '.join(argv)}):\n{output}")
    (partial / _COMPLETE).write_text(f"kafka {KAFKA_VERSION}\n")
    if (libs / _COMPLETE).exists():  # another run finished first
        shutil.rmtree(partial, ignore_errors=True)
    else:
        shutil.rmtree(libs, ignore_errors=True)
        partial.chmod(0o755)  # mkdtemp made it private
        partial.rename(libs)
    jars = len(list(libs.glob("*.jar")))
    print(f"Kafka {KAFKA_VERSION}: {jars} jars in {libs} ({time.monotonic() - started:.0f} s)", flush=True)
    return libs


class KafkaBroker:
    """One KRaft node (broker and controller in one JVM) keeping its data in ``data_dir``.

    Without ``voters`` it is the whole cluster (node 1, the only voter, formatted ``--standalone``).
    With ``voters`` (node id -> controller port of every node) it is node ``node_id`` of that cluster,
    formatted with the shared ``cluster_id`` (set by the time it starts); internal topics (consumer
    offsets, transaction state) get one replica per voter and ``min_insync_replicas`` of them must have
    a write.
    """

    def __init__(
        self,
        *,
        data_dir: Path,
        port: int = 9092,
        controller_port: int = 9093,
        log_dir: Path,
        heap: str = "512m",
        node_id: int = 1,
        voters: dict[int, int] | None = None,
        cluster_id: str | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.port = port
        self.controller_port = controller_port
        self.log_dir = log_dir
        self.heap = heap
        self.node_id = node_id
        self.voters = dict(voters or {})
        self.cluster_id = cluster_id
        if self.voters and self.voters.get(node_id) != controller_port:
            raise ValueError(f"node {node_id} is not a voter on its controller port {controller_port}")

    @property
    def name(self) -> str:
        return f"kafka-{self.node_id}" if self.voters else "kafka"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def replication_factor(self) -> int:
        """Replicas the internal topics get: one per node of the cluster."""
        return max(1, len(self.voters))

    @property
    def config_path(self) -> Path:
        return self.data_dir / "server.properties"

    def processes(self) -> list[ManagedProcess]:
        """The same interface as ``KafkaCluster``: the processes to start, in order (here: one)."""
        return [self.process()]

    def process(self) -> ManagedProcess:
        """Check the ports, fetch the jars if needed, write the config, format once; not started yet."""
        require_free_port(self.name.capitalize(), self.port)
        require_free_port(f"{self.name.capitalize()} controller", self.controller_port)
        java = shutil.which("java")
        if java is None:
            raise StartupError("Kafka: `java` (a JDK or JRE 17 or newer) is needed to run the broker.")
        libs = ensure_kafka_jars()
        archive = ensure_class_archive(java, libs)
        jvm = _jvm(java, libs, *([f"-XX:SharedArchiveFile={archive}"] if archive else []))
        self._prepare(jvm)
        return self._managed([*jvm, f"-Xms{self.heap}", f"-Xmx{self.heap}"])

    def _prepare(self, jvm: list[str]) -> None:
        """Write the config; format the log dir on first use only, so a restart keeps topics and records."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self._server_properties())
        if (self.data_dir / "logs" / "meta.properties").exists():
            return
        tool = [*jvm, "-Dhearth.kafka.loglevel=WARN", "kafka.tools.StorageTool"]
        if self.voters:  # static voters in the config: every node is formatted alike, with the shared id
            if self.cluster_id is None:
                raise StartupError(f"{self.name}: a cluster node needs the cluster's id to be formatted")
            _run([*tool, "format", "-t", str(self.cluster_id), "-c", str(self.config_path)])
            return
        cluster_id = self.cluster_id or _run([*tool, "random-uuid"]).split()[-1]
        _run([*tool, "format", "-t", cluster_id, "-c", str(self.config_path), "--standalone"])

    def _managed(self, jvm: list[str]) -> ManagedProcess:
        return ManagedProcess(
            name=self.name,
            argv=[*jvm, "kafka.Kafka", str(self.config_path)],
            log_path=self.log_dir / f"{self.name}.log",
            healthy=lambda: kafka_answers(self.port),
            cwd=self.data_dir,
            url=f"kafka://{self.bootstrap}",
        )

    def _quorum(self) -> dict[str, str]:
        if not self.voters:
            return {"controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}"}
        voters = ",".join(f"{node}@127.0.0.1:{port}" for node, port in sorted(self.voters.items()))
        return {
            "controller.quorum.voters": voters,
            # A killed node is fenced (its partitions move to the other leaders) after this much silence;
            # the default 9 s would stall writes to its partitions for that long.
            "broker.session.timeout.ms": "6000",
            "broker.heartbeat.interval.ms": "1000",
        }

    def _server_properties(self) -> str:
        rf = str(self.replication_factor)
        min_isr = str(min_insync_replicas(self.replication_factor))
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            **self._quorum(),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            # Topics are created explicitly by ensure_topics, never on first use.
            "auto.create.topics.enable": "false",
            "num.partitions": "12",
            # Internal topics on every node; a write needs min.insync.replicas of them (one node alone).
            "default.replication.factor": rf,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min_isr,
            # A replica that lost its data must never become leader (it would drop acknowledged records).
            "unclean.leader.election.enable": "false",
            # Fewer internal partitions than the default 50: faster first group join, fewer files.
            "offsets.topic.num.partitions": "12",
            "transaction.state.log.num.partitions": "12",
            "group.initial.rebalance.delay.ms": "0",
            # A group's committed offsets kept a year, not a week: the device actor's inbox group (never
            # subscribed) would lose a quiet partition's commit a week after it, and a stack down for longer
            # would restart its consumers from their topics' first offsets (inbox.py, "Kept offsets").
            "offsets.retention.minutes": OFFSETS_RETENTION_MINUTES,
            # Laptop-sized storage: 64 MB segments, a week of retention unless a topic says otherwise
            # (the journal keeps everything), a small cleaner buffer inside a small heap.
            "log.segment.bytes": str(64 * 1024 * 1024),
            "log.retention.hours": "168",
            "log.retention.check.interval.ms": "60000",
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())


def _jvm(java: str, libs: Path, *options: str) -> list[str]:
    """The java command line shared by the broker and the storage tool, up to the main class."""
    return [
        java,
        # Measured on 2 cores: the serial collector and the class-data archive together cut a start from
        # about 5 s to under 2 s (wall) with no loss of throughput; C1-only JIT saved CPU but no wall time.
        "-XX:+UseSerialGC",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        *options,
        "-cp",
        f"{libs}/*",
    ]


def prepare_broker() -> None:
    """What a broker's first start would make, made now (``make jars``): the jars and the class-data
    archive. The test workers start their brokers at the same moment, and each would otherwise train an
    archive of its own."""
    libs = ensure_kafka_jars()
    if (java := shutil.which("java")) is not None:
        ensure_class_archive(java, libs)


def ensure_class_archive(java: str, libs: Path) -> Path | None:
    """A class-data-sharing archive of the classes a broker loads, so later JVMs map them instead of
    loading and verifying them again. Made once per Java installation by a short training run; None
    (start without it) if this JVM cannot write one."""
    jvm = Path(java).resolve()
    key = hashlib.sha1(f"{jvm}:{jvm.stat().st_mtime_ns}".encode()).hexdigest()[:10]
    archive = libs.parent / f"classes-{key}.jsa"
    if archive.exists():
        return archive
    print("preparing a class-data archive so Kafka starts fast (once)...", flush=True)
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="hearth-kafka-training-") as tmp:
        trainee = KafkaBroker(
            data_dir=Path(tmp),
            log_dir=libs.parent / "training",
            port=free_port(),
            controller_port=free_port(),
        )
        trainee._prepare(_jvm(java, libs))
        proc = trainee._managed(_jvm(java, libs, f"-XX:ArchiveClassesAtExit={partial}"))
        proc.start()
        try:
            proc.wait_healthy(120)
        finally:
            proc.stop()  # the JVM writes the archive as it exits
    if not partial.exists():
        print(f"Kafka: this JVM wrote no class-data archive, starting without one (see {proc.log_path})")
        return None
    partial.replace(archive)
    return archive


def _run(argv: Sequence[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise StartupError(
            f"Kafka storage tool failed ({' '.join(argv[-4:])}), exit code {done.returncode}:\n"
            f"{done.stdout}{done.stderr}"
        )
    return done.stdout
