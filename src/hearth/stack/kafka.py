"""A real Apache Kafka broker for the local stack, run from the jars on Maven Central (no Docker).

``ensure_kafka_jars`` resolves the broker's classpath once with Maven into ``.hearth/kafka/<version>/libs``;
``KafkaBroker`` writes a single-node KRaft configuration (broker and controller in one JVM), formats its
log dir the first time and returns the ``ManagedProcess`` that runs it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from hearth.stack.process import ManagedProcess, StartupError, free_port, require_free_port

KAFKA_VERSION = "4.4.0"

_HERE = Path(__file__).resolve().parent
POM = _HERE / "kafka-pom.xml"
LOG4J_CONFIG = _HERE / "kafka-log4j2.xml"
DEFAULT_ROOT = _HERE.parents[2] / ".hearth"  # <repo>/.hearth (src/hearth/stack -> repo)
_COMPLETE = ".complete"


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


def kafka_answers(port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> bool:
    """True when a Kafka broker on host:port answers a Metadata request and lists itself as a live broker.

    Speaks the wire protocol directly (Metadata v4, no topics), so it is a plain blocking call that works
    inside or outside an event loop.
    """
    client_id = b"hearth-health"
    request = struct.pack(">hhih", 3, 4, 1, len(client_id)) + client_id + struct.pack(">ib", 0, 0)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _read(sock, 4))
            if not 12 <= size <= 1 << 20:  # not a Kafka reply (another server on the port)
                return False
            body = _read(sock, size)
    except OSError:
        return False
    try:
        return _lists_broker(body, port)
    except struct.error:  # a reply too short to be Metadata v4: not (yet) a Kafka broker
        return False


def _lists_broker(body: bytes, port: int) -> bool:
    """Whether a Metadata v4 response (after its size) answers our request and lists a broker on port."""
    # correlation_id, throttle_time_ms, then the brokers: [node_id, host, port, rack]
    correlation_id, _throttle, brokers = struct.unpack_from(">iii", body)
    if correlation_id != 1:
        return False
    at = 12
    for _ in range(brokers):
        at += 4
        (host_len,) = struct.unpack_from(">h", body, at)
        at += 2 + host_len
        (broker_port, rack_len) = struct.unpack_from(">ih", body, at)
        at += 6 + max(rack_len, 0)
        if broker_port == port:
            return True
    return False


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        data += chunk
    return data


class KafkaBroker:
    """A single-node KRaft Kafka (broker and controller in one JVM) keeping its data in ``data_dir``."""

    def __init__(
        self,
        *,
        data_dir: Path,
        port: int = 9092,
        controller_port: int = 9093,
        log_dir: Path,
        heap: str = "512m",
    ) -> None:
        self.data_dir = data_dir
        self.port = port
        self.controller_port = controller_port
        self.log_dir = log_dir
        self.heap = heap

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "server.properties"

    def process(self) -> ManagedProcess:
        """Check the ports, fetch the jars if needed, write the config, format once; not started yet."""
        require_free_port("Kafka", self.port)
        require_free_port("Kafka controller", self.controller_port)
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
        cluster_id = _run([*tool, "random-uuid"]).split()[-1]
        _run([*tool, "format", "-t", cluster_id, "-c", str(self.config_path), "--standalone"])

    def _managed(self, jvm: list[str]) -> ManagedProcess:
        return ManagedProcess(
            name="kafka",
            argv=[*jvm, "kafka.Kafka", str(self.config_path)],
            log_path=self.log_dir / "kafka.log",
            healthy=lambda: kafka_answers(self.port),
            cwd=self.data_dir,
            url=f"kafka://{self.bootstrap}",
        )

    def _server_properties(self) -> str:
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            # Topics are created explicitly by ensure_topics, never on first use.
            "auto.create.topics.enable": "false",
            "num.partitions": "12",
            # One node: every internal topic has one replica.
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # Fewer internal partitions than the default 50: faster first group join, fewer files.
            "offsets.topic.num.partitions": "12",
            "transaction.state.log.num.partitions": "12",
            "group.initial.rebalance.delay.ms": "0",
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


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise StartupError(
            f"Kafka storage tool failed ({' '.join(argv[-4:])}), exit code {done.returncode}:\n"
            f"{done.stdout}{done.stderr}"
        )
    return done.stdout
