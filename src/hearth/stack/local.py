"""The whole local stack (``hearth up``): Kafka, PostgreSQL, Redis, the three services, the simulator.

Everything lives under one home directory (``.hearth/`` by default): data in ``data/``, logs in ``logs/``,
the token secret in ``secret``. Parts start in dependency order, each waits for its health check, and
stop in reverse order. Data survives restarts.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from hearth.stack.kafka import KafkaBroker
from hearth.stack.mosquitto import MosquittoBroker
from hearth.stack.postgres import PostgresServer
from hearth.stack.process import ManagedProcess, StartupError, require_free_port
from hearth.stack.redis import RedisServer
from hearth_shared.kafka import ensure_topics
from hearth_shared.settings import StackSettings

DEFAULT_HOME = Path(".hearth")


@dataclass
class StackPorts:
    kafka: int = 9092
    kafka_controller: int = 9093
    postgres: int = 5432
    redis: int = 6379
    command_api: int = 8000
    query_api: int = 8001
    mqtt: int = 1883
    mqtts: int = 8883


def token_secret(home: Path) -> str:
    """The secret that signs API tokens, made once per home directory (HEARTH_TOKEN_SECRET wins)."""
    if os.environ.get("HEARTH_TOKEN_SECRET"):
        return os.environ["HEARTH_TOKEN_SECRET"]
    path = home / "secret"
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


def http_ok(url: str) -> Callable[[], bool]:
    def check() -> bool:
        return httpx.get(url, timeout=1.0).status_code == 200

    return check


def log_says(path: Path, text: str) -> Callable[[], bool]:
    """Healthy once the log, from its size now on (logs are appended), says ``text`` (any case)."""
    start = path.stat().st_size if path.exists() else 0

    def check() -> bool:
        with open(path, "rb") as f:
            f.seek(start)
            return text.lower().encode() in f.read().lower()

    return check


@dataclass
class Services:
    """The Hearth services as child processes, for `hearth up` and for the tests alike."""

    settings: StackSettings
    logs: Path
    data: Path
    command_api_port: int = 8000
    query_api_port: int = 8001
    mqtt_port: int = 1883
    mqtt_password: str = ""  # the broker account of Hearth's own components (the device gateway)
    # The broker's access files and pid (MosquittoBroker.access_dir, .pid_file): the broker-access follower's.
    mqtt_access_dir: Path | None = None
    mqtt_pid_file: Path | None = None
    mqtt_simulator_password: str = ""  # the simulator hub's account (MosquittoBroker.simulator)
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        s = self.settings
        broker = self.data / "mosquitto"  # LocalStack's MosquittoBroker data dir
        return {
            "HEARTH_KAFKA_BOOTSTRAP_SERVERS": s.kafka_bootstrap_servers,
            "HEARTH_TOPIC_PREFIX": s.topic_prefix,
            "HEARTH_POSTGRES_DSN": s.postgres_dsn,
            "HEARTH_REDIS_URL": s.redis_url,
            "HEARTH_TOKEN_SECRET": s.token_secret,
            "HEARTH_COMMAND_API_PORT": str(self.command_api_port),
            "HEARTH_READ_MODELS_PORT": str(self.query_api_port),
            "HEARTH_DEVICE_ACTOR_DATA_DIR": str(self.data / "device-actor"),
            "HEARTH_DEVICE_GATEWAY_MQTT_PORT": str(self.mqtt_port),
            "HEARTH_DEVICE_GATEWAY_MQTT_PASSWORD": self.mqtt_password,
            "HEARTH_COMMAND_API_MQTT_URL": f"mqtt://127.0.0.1:{self.mqtt_port}",
            "HEARTH_SIMULATOR_MQTT_PORT": str(self.mqtt_port),
            "HEARTH_SIMULATOR_MQTT_PASSWORD": self.mqtt_simulator_password,
            "HEARTH_BROKER_ACCESS_ACCESS_DIR": str(self.mqtt_access_dir or broker / "access"),
            "HEARTH_BROKER_ACCESS_PID_FILE": str(self.mqtt_pid_file or broker / "mosquitto.pid"),
            "HEARTH_ANALYTICS_CHECKPOINT_DIR": str(self.data / "analytics" / "checkpoints"),
            "HEARTH_ANALYTICS_OUTPUT_DIR": str(self.data / "analytics" / "reports"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
        }

    @staticmethod
    def names(*, simulate: bool, analytics: bool = False) -> list[str]:
        names = ["broker-access", "device-actor", "device-gateway", "projector", "query-api", "command-api"]
        return names + ["simulator"] * simulate + ["analytics"] * analytics

    def part(self, name: str) -> tuple[ManagedProcess, float]:
        """The process for one service (not started) and how long it may take to become healthy."""
        api, query = f"http://127.0.0.1:{self.command_api_port}", f"http://127.0.0.1:{self.query_api_port}"
        log = self.logs / f"{name}.log"
        argv, healthy, url, timeout_s = {
            "device-actor": (["hearth_device_actor"], log_says(log, "[^worker]: ready"), "", 90.0),
            "broker-access": (
                ["hearth_device_gateway.broker_access"],
                log_says(log, "broker access caught up"),
                "",
                60.0,
            ),
            "device-gateway": (["hearth_device_gateway"], log_says(log, "device gateway: ready"), "", 60.0),
            "projector": (["hearth_read_models", "projector"], log_says(log, "starts at"), "", 60.0),
            "query-api": (["hearth_read_models", "api"], http_ok(f"{query}/healthz"), query, 60.0),
            "command-api": (["hearth_command_api"], http_ok(f"{api}/healthz"), api, 120.0),
            "simulator": (["hearth.simulator"], log_says(log, "simulator: playing"), "", 60.0),
            "analytics": (["hearth_analytics", "stream"], log_says(log, "started hearth-training"), "", 300),
        }[name]
        process = ManagedProcess(
            name=name,
            argv=[sys.executable, "-m", *argv],
            log_path=log,
            healthy=healthy,
            env=self.env(),
            url=url,
        )
        return process, timeout_s


@dataclass
class LocalStack:
    home: Path = DEFAULT_HOME
    ports: StackPorts = field(default_factory=StackPorts)
    topic_prefix: str = "hearth"
    simulate: bool = True
    analytics: bool = True
    report: Callable[[str], None] = print
    parts: list[ManagedProcess] = field(default_factory=list)
    mqtt_certfile: Path | None = None  # a real certificate for the MQTT TLS listener (else self-signed)
    mqtt_keyfile: Path | None = None

    def __post_init__(self) -> None:
        self.home = self.home.resolve()
        self.logs = self.home / "logs"
        self.data = self.home / "data"
        self.kafka = KafkaBroker(
            data_dir=self.data / "kafka",
            port=self.ports.kafka,
            controller_port=self.ports.kafka_controller,
            log_dir=self.logs,
        )
        self.postgres = PostgresServer(
            data_dir=self.data / "postgres", port=self.ports.postgres, log_dir=self.logs
        )
        self.redis = RedisServer(data_dir=self.data / "redis", port=self.ports.redis, log_dir=self.logs)
        self.mosquitto = MosquittoBroker(
            data_dir=self.data / "mosquitto",
            port=self.ports.mqtt,
            tls_port=self.ports.mqtts,
            log_dir=self.logs,
            certfile=self.mqtt_certfile,
            keyfile=self.mqtt_keyfile,
        )

    @property
    def settings(self) -> StackSettings:
        return StackSettings(
            kafka_bootstrap_servers=self.kafka.bootstrap,
            topic_prefix=self.topic_prefix,
            postgres_dsn=self.postgres.dsn,
            redis_url=self.redis.url,
            token_secret=token_secret(self.home),
        )

    def check_ports(self) -> None:
        for name, port in vars(self.ports).items():
            require_free_port(name.replace("_", " "), port)

    def start(self) -> None:
        """Start every part in order; on any failure stop what started and raise StartupError."""
        self.check_ports()
        self.home.mkdir(parents=True, exist_ok=True)
        try:
            self._start(self.kafka.process(), timeout_s=90)
            asyncio.run(ensure_topics(self.kafka.bootstrap, self.settings.topics.specs()))
            self._start(self.mosquitto.process(), timeout_s=30)
            self.postgres.init()
            self._start(self.postgres.process(), timeout_s=30)
            self.postgres.ensure_database()
            self._start(self.redis.process(), timeout_s=15)
            services = Services(
                self.settings,
                logs=self.logs,
                data=self.data,
                command_api_port=self.ports.command_api,
                query_api_port=self.ports.query_api,
                mqtt_port=self.ports.mqtt,
                mqtt_password=self.mosquitto.admin.password,
                mqtt_access_dir=self.mosquitto.access_dir,
                mqtt_pid_file=self.mosquitto.pid_file,
                mqtt_simulator_password=self.mosquitto.simulator.password,
            )
            for name in services.names(simulate=self.simulate, analytics=self.analytics):
                part, timeout_s = services.part(name)
                self._start(part, timeout_s=timeout_s)
        except BaseException:
            self.stop()
            raise

    def _start(self, part: ManagedProcess, *, timeout_s: float) -> None:
        self.report(f"starting {part.name} ...")
        part.start()
        self.parts.append(part)
        part.wait_healthy(timeout_s)

    def failed(self) -> ManagedProcess | None:
        """A part that has exited on its own, if any."""
        return next((p for p in self.parts if not p.running), None)

    def stop(self) -> None:
        for part in reversed(self.parts):
            self.report(f"stopping {part.name} ...")
            part.stop()
        self.parts.clear()


__all__ = ["DEFAULT_HOME", "LocalStack", "Services", "StackPorts", "StartupError", "token_secret"]
