"""The embedded servers on free ports under one directory, each started until it is healthy.

Written once for the tests' fixtures (tests/conftest.py, tests/identity_stack.py) and the benchmarks'
stacks (``hearth.bench.stack``): where each server keeps its data and logs, which ports it takes, what
must happen before and after its process starts (PostgreSQL's initdb, then its database), and how long
it may take. The supervised local stack (``local.py``) runs the same server classes on its fixed,
configured ports and restarts them itself, so it builds its own (see its ``part_specs``).

A part that does not become healthy is stopped before the error goes up, so a failed start leaves no
process behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from hearth.stack.kafka import KafkaBroker
from hearth.stack.mosquitto import MosquittoBroker
from hearth.stack.postgres import PostgresServer
from hearth.stack.process import ManagedProcess, free_port
from hearth.stack.redis import RedisServer

# How long each may take to become healthy, on a busy shared machine (Kafka's JVM is the slow one).
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


def start_kafka(directory: Path) -> StartedServer[KafkaBroker]:
    broker = KafkaBroker(
        data_dir=directory / "kafka", port=free_port(), controller_port=free_port(), log_dir=directory
    )
    return StartedServer(broker, start_healthy(broker.process(), KAFKA_STARTUP_S))


def start_postgres(directory: Path) -> StartedServer[PostgresServer]:
    """PostgreSQL initialised (initdb, once per directory), running, and with Hearth's database."""
    server = PostgresServer(data_dir=directory / "pg", port=free_port(), log_dir=directory)
    server.init()
    process = start_healthy(server.process(), POSTGRES_STARTUP_S)
    try:
        server.ensure_database()
    except BaseException:
        process.stop()
        raise
    return StartedServer(server, process)


def start_redis(directory: Path) -> StartedServer[RedisServer]:
    server = RedisServer(data_dir=directory / "redis", port=free_port(), log_dir=directory)
    return StartedServer(server, start_healthy(server.process(), REDIS_STARTUP_S))


def start_mosquitto(directory: Path) -> StartedServer[MosquittoBroker]:
    """Mosquitto with its three listeners (devices, devices over TLS, platform) on free ports;
    ``.server.admin`` is Hearth's own account (on ``.server.platform_port``)."""
    broker = MosquittoBroker(
        data_dir=directory / "mosquitto",
        port=free_port(),
        tls_port=free_port(),
        platform_port=free_port(),
        log_dir=directory,
    )
    return StartedServer(broker, start_healthy(broker.process(), MOSQUITTO_STARTUP_S))
