"""The embedded servers' start-up, written once for the tests' fixtures (tests/conftest.py,
tests/support/identity_stack.py), the benchmarks' stacks (``hearth_bench.harness.stack``) and ``hearth up``
(``local.py``).

A ``ServerStartup`` says how one server starts: what must happen before its process runs (PostgreSQL's
initdb, a stale ``postmaster.pid`` cleared), the process itself (not started, a new one each time), how
long it may take to become healthy, and what follows once it is (PostgreSQL's database). The callers
differ only in where the servers live and which ports they take: the tests and benches build them on free
ports under one temporary directory and start each once (``start_kafka`` ...: ``start_once``); the
local stack builds them on its fixed, configured ports under ``.hearth/data`` and hands the same
start-ups to its supervisor, which starts them in order and restarts them (``LocalStack.part_specs``).

A part that does not become healthy, or whose after-start step fails, is stopped before the error goes
up, so a failed start leaves no process behind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_devstack.servers.postgres import PostgresServer
from hearth_devstack.servers.redis import RedisServer
from hearth_devstack.supervision.ports import free_port
from hearth_devstack.supervision.process import ManagedProcess
from hearth_devstack.supervision.stale import clear_stale_postmaster_pid

# How long each may take to become healthy, on a busy shared machine (Kafka's JVM is the slow one); the
# local stack's supervisor waits as long for each start and restart.
KAFKA_STARTUP_S = 120.0
POSTGRES_STARTUP_S = 60.0
REDIS_STARTUP_S = 30.0
MOSQUITTO_STARTUP_S = 30.0

ServerT = TypeVar("ServerT")


@dataclass(frozen=True, slots=True)
class StartedServer(Generic[ServerT]):
    """A server (its ports, URLs, accounts) and its healthy process (stop it when done)."""

    server: ServerT
    process: ManagedProcess


def start_healthy(part: ManagedProcess, timeout_s: float) -> ManagedProcess:
    """Start ``part`` and wait until it is healthy; stop it if it is not (then raise)."""
    part.start()
    try:
        part.wait_healthy(timeout_s)
    except BaseException:
        part.stop()
        raise
    return part


@dataclass(frozen=True, slots=True)
class ServerStartup(Generic[ServerT]):
    """How one server starts (see the module's docstring); ``make`` runs what must come first."""

    name: str
    server: ServerT
    make: Callable[[], ManagedProcess]  # a new process, not started, for each (re)start
    timeout_s: float
    url: str
    after_healthy: Callable[[], None] | None = None  # once per start, when it first answers


def kafka_startup(broker: KafkaBroker) -> ServerStartup[KafkaBroker]:
    """A single broker (its log dir formatted on first start); topics are the caller's to create."""
    return ServerStartup("kafka", broker, broker.process, KAFKA_STARTUP_S, broker.bootstrap)


def postgres_startup(server: PostgresServer) -> ServerStartup[PostgresServer]:
    """initdb once per data directory and a stale ``postmaster.pid`` cleared before each start; Hearth's
    database made once it answers."""

    def make() -> ManagedProcess:
        server.init()
        clear_stale_postmaster_pid(server.data_dir)
        return server.process()

    return ServerStartup("postgres", server, make, POSTGRES_STARTUP_S, server.dsn, server.ensure_database)


def redis_startup(server: RedisServer) -> ServerStartup[RedisServer]:
    return ServerStartup("redis", server, server.process, REDIS_STARTUP_S, server.url)


def mosquitto_startup(broker: MosquittoBroker, name: str = "mosquitto") -> ServerStartup[MosquittoBroker]:
    """One broker; ``name`` for each of several (a stack's MQTT shards: ``mosquitto-1``, ...)."""
    return ServerStartup(name, broker, lambda: broker.process(name), MOSQUITTO_STARTUP_S, broker.url)


def start_once(startup: ServerStartup[ServerT]) -> StartedServer[ServerT]:
    """Start the server, wait until it is healthy and run its after-start step; stop it on any failure."""
    process = start_healthy(startup.make(), startup.timeout_s)
    if startup.after_healthy is not None:
        try:
            startup.after_healthy()
        except BaseException:
            process.stop()
            raise
    return StartedServer(startup.server, process)


def start_kafka(directory: Path) -> StartedServer[KafkaBroker]:
    broker = KafkaBroker(
        data_dir=directory / "kafka", port=free_port(), controller_port=free_port(), log_dir=directory
    )
    return start_once(kafka_startup(broker))


def start_postgres(directory: Path) -> StartedServer[PostgresServer]:
    """PostgreSQL initialised (initdb, once per directory), running, and with Hearth's database."""
    server = PostgresServer(data_dir=directory / "pg", port=free_port(), log_dir=directory)
    return start_once(postgres_startup(server))


def start_redis(directory: Path) -> StartedServer[RedisServer]:
    server = RedisServer(data_dir=directory / "redis", port=free_port(), log_dir=directory)
    return start_once(redis_startup(server))


def start_mosquitto(
    directory: Path, name: str = "mosquitto", *, accounts_dir: Path | None = None
) -> StartedServer[MosquittoBroker]:
    """Mosquitto with its three listeners (devices, devices over TLS, platform) on free ports;
    ``.server.admin`` is Hearth's own account (on ``.server.platform_port``). A second broker of the same
    stack (another MQTT shard) has its own ``name`` and the first one's ``accounts_dir``."""
    broker = MosquittoBroker(
        data_dir=directory / name,
        port=free_port(),
        tls_port=free_port(),
        platform_port=free_port(),
        log_dir=directory,
        accounts_dir=accounts_dir,
    )
    return start_once(mosquitto_startup(broker, name))
