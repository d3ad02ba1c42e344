"""The whole local stack (``hearth up``): Kafka, Mosquitto, PostgreSQL, Redis, the services, the simulator.

Everything lives under one home directory (``.hearth/`` by default): data in ``data/``, logs in ``logs/``,
the token secret in ``secret``, the supervisor's view of the parts in ``status.json``. Each part starts as
soon as what it depends on is healthy (so the servers start together, then the services together), and
they stop the other way round, a part once what depends on it has stopped. Data survives restarts.
Once up, ``hearth_devstack.supervision.supervisor`` keeps them up: a part that dies is restarted with
backoff when what it depends on is healthy; one in a crash loop is stopped alone, with its log tail.

Kafka is one node (``brokers=1``: ``data/kafka``, ``logs/kafka.log``) or a cluster of ``brokers`` nodes
(``data/kafka-cluster/node-<id>``, ``logs/kafka-<id>.log``, see servers/kafka_cluster.py), whose nodes
start and stop together (none is healthy before a controller quorum forms) and whose topics get one
replica per node.

MQTT is one Mosquitto (``mqtt_brokers=1``: ``data/mosquitto``, ``logs/mosquitto.log``) or one per MQTT
broker shard (``hearth up --mqtt-brokers 2``: shard ``i`` from 1 in ``data/mosquitto-<i>``, its listeners
at the first's ports + 2i (devices, platform) and + i (TLS), ``logs/mosquitto-<i>.log``), each with its
own broker-access follower and device gateway; the brokers share the service accounts, and the simulator
plays each device through its shard's broker. A device's shard is recorded when it registers, so a
home keeps its shards: start it with at least as many brokers as it was made with.

Device-actor workers and query-API processes may be several (``device_actors``, ``query_apis``; ``hearth
up --device-actors 3 --query-apis 2``): parts ``device-actor.2``, ``query-api.2`` ... each supervised on
its own, with what its service needs (``service_processes``: instance names, the n-th query API on
``--query-api-port`` + n - 1).

Each server starts as the tests and benches start it (``hearth_devstack.launch.server_startup``: initdb
and a stale pid cleared before PostgreSQL, its database after, how long each may take); what is the local
stack's own is where they live (fixed ports, ``data/`` and ``logs/``), the topics made once Kafka is up,
and the supervision. The services are ``hearth_devstack.launch.service_processes.Services``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from hearth.support.stack_dir import DEFAULT_HOME, archive_dir, token_secret
from hearth_devstack.launch.server_startup import (
    ServerStartup,
    kafka_startup,
    mosquitto_startup,
    postgres_startup,
    redis_startup,
)
from hearth_devstack.launch.service_processes import Services, instance_part, instance_port
from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.servers.kafka_cluster import KafkaCluster
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_devstack.servers.postgres import PostgresServer
from hearth_devstack.servers.redis import RedisServer
from hearth_devstack.supervision.ports import free_ports, require_free_port
from hearth_devstack.supervision.process import StartupError
from hearth_devstack.supervision.status import PartStatus, write_status
from hearth_devstack.supervision.supervisor import PartSpec, RestartPolicy, Supervisor
from hearth_shared.adapters.kafka import apply_topic_config, ensure_topics
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.mqtt import DEVICE_PORT, DEVICE_TLS_PORT, PLATFORM_PORT


@dataclass
class StackPorts:
    kafka: int = 9092
    kafka_controller: int = 9093
    postgres: int = 5432
    redis: int = 6379
    command_api: int = 8000
    query_api: int = 8001
    mqtt: int = DEVICE_PORT
    mqtts: int = DEVICE_TLS_PORT
    mqtt_platform: int = PLATFORM_PORT

    @classmethod
    def free(cls, room: int = 1) -> StackPorts:
        """Ports free now (tests, benches: never the defaults), each with the ``room - 1`` after it free
        too: a Kafka cluster's further nodes, MQTT shards and query APIs listen at a part's port plus a
        few (``KafkaCluster.spread``, ``mqtt_shard``, ``instance_port``), so a stack of several needs room
        (5 for 3 Kafka nodes). One block of free ports in a row, so no part lands on another's."""
        count = len(fields(cls))
        base = free_ports(count * room)
        return cls(*(base + i * room for i in range(count)))

    def mqtt_shard(self, i: int) -> tuple[int, int, int]:
        """(devices, TLS, platform) ports of MQTT shard ``i`` (0: the ports above)."""
        return self.mqtt + 2 * i, self.mqtts + i, self.mqtt_platform + 2 * i


def retention_warning(settings: StackSettings, archive: Path) -> str | None:
    """A warning when the journal keeps only a window while the archive lags it (None: nothing to say)."""
    if settings.journal_retention_s is None:
        return None
    import numpy as np

    from hearth_analytics.archive_files.archive_check import check_archive
    from hearth_analytics.archive_files.archive_table import journal_ranges, read_columns

    rows = read_columns(archive, ["kafka_partition", "kafka_offset"])
    columns = [
        np.asarray(rows.column(c).to_numpy(zero_copy_only=False), dtype=np.int64) for c in rows.column_names
    ]
    lag = check_archive(columns[0], columns[1], asyncio.run(journal_ranges(settings))).lag
    if not lag:
        return None
    return (
        f"WARNING: the journal keeps facts for {settings.journal_retention_s} s only "
        f"(HEARTH_JOURNAL_RETENTION_S) while the archive lags it by {lag:,} facts: facts the archive has not "
        "taken by then are deleted for good. See `hearth archive status` and `hearth archive verify`."
    )


def supervised(startup: ServerStartup[Any]) -> PartSpec:
    """A server's start-up (launch/server_startup.py, as the tests and benches start it) as a supervised
    part."""
    return PartSpec(
        startup.name, startup.make, startup.timeout_s, after_healthy=startup.after_healthy, url=startup.url
    )


@dataclass
class LocalStack:
    home: Path = DEFAULT_HOME
    ports: StackPorts = field(default_factory=StackPorts)
    topic_prefix: str = "hearth"
    brokers: int = 1
    mqtt_brokers: int = 1  # MQTT broker shards, a Mosquitto each
    device_actors: int = 1  # device-actor workers (at most the inbox's partitions serve)
    query_apis: int = 1  # query-API processes, each on its own port
    simulate: bool = True
    analytics: bool = True
    report: Callable[[str], None] = print
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    service_env: dict[str, str] = field(default_factory=dict)  # extra HEARTH_* settings (tests)
    supervisor: Supervisor | None = None
    mqtt_certfile: Path | None = None  # a real certificate for the MQTT TLS listener (else self-signed)
    mqtt_keyfile: Path | None = None

    def __post_init__(self) -> None:
        self.home = self.home.resolve()
        self.logs = self.home / "logs"
        self.data = self.home / "data"
        self.kafka: KafkaBroker | KafkaCluster = (
            KafkaBroker(
                data_dir=self.data / "kafka",
                port=self.ports.kafka,
                controller_port=self.ports.kafka_controller,
                log_dir=self.logs,
            )
            if self.brokers == 1
            else KafkaCluster.spread(
                data_dir=self.data / "kafka-cluster",
                log_dir=self.logs,
                nodes=self.brokers,
                port=self.ports.kafka,
                controller_port=self.ports.kafka_controller,
            )
        )
        self.postgres = PostgresServer(
            data_dir=self.data / "postgres", port=self.ports.postgres, log_dir=self.logs
        )
        self.redis = RedisServer(data_dir=self.data / "redis", port=self.ports.redis, log_dir=self.logs)
        self.mosquittos = [self._mosquitto(i) for i in range(self.mqtt_brokers)]
        self.mosquitto = self.mosquittos[0]

    def _mosquitto(self, i: int) -> MosquittoBroker:
        """MQTT shard ``i``'s broker (see the module docstring); they all keep the first's accounts."""
        port, tls_port, platform_port = self.ports.mqtt_shard(i)
        return MosquittoBroker(
            data_dir=self.data / ("mosquitto" if i == 0 else f"mosquitto-{i}"),
            port=port,
            tls_port=tls_port,
            platform_port=platform_port,
            log_dir=self.logs,
            certfile=self.mqtt_certfile,
            keyfile=self.mqtt_keyfile,
            accounts_dir=None if i == 0 else self.data / "mosquitto" / "access",
        )

    @property
    def settings(self) -> StackSettings:
        return StackSettings(
            kafka_bootstrap_servers=self.kafka.bootstrap,
            kafka_replication_factor=self.kafka.replication_factor,
            topic_prefix=self.topic_prefix,
            postgres_dsn=self.postgres.dsn,
            redis_url=self.redis.url,
            token_secret=token_secret(self.home),
        )

    def check_ports(self) -> None:
        named = {name.replace("_", " "): port for name, port in vars(self.ports).items()}
        for i, broker in enumerate(self.mosquittos[1:], start=1):
            named |= {f"mqtt {i}": broker.port, f"mqtts {i}": broker.tls_port}
            named[f"mqtt platform {i}"] = broker.platform_port
        for n in range(2, self.query_apis + 1):
            named[f"query api {n}"] = instance_port(self.ports.query_api, n)
        if isinstance(self.kafka, KafkaCluster):  # node 1 has the kafka ports, the others the next ones
            del named["kafka"], named["kafka controller"]
            for node in self.kafka.nodes:
                named |= {node.name: node.port, f"{node.name} controller": node.controller_port}
        by_port: dict[int, list[str]] = {}
        for name, port in named.items():
            by_port.setdefault(port, []).append(name)
        if clashes := {port: names for port, names in by_port.items() if len(names) > 1}:
            raise StartupError(f"these parts would share a port: {clashes} (see `hearth up --help`)")
        for name, port in named.items():
            require_free_port(name, port)

    def kafka_parts(self) -> list[PartSpec]:
        """The broker, or a cluster's nodes (depending on nothing, they start together; the services
        depend on all of them alike, so they stop together, after the services: see
        supervision/part_order.py). Topics are created once the last of them is healthy (and a cluster has
        formed)."""

        def create_topics() -> None:
            if isinstance(self.kafka, KafkaCluster):
                self.kafka.wait_formed(150.0)
            asyncio.run(ensure_topics(self.kafka.bootstrap, self.settings.topics.specs()))
            asyncio.run(apply_topic_config(self.kafka.bootstrap, self.settings.topics.journal_spec()))
            if warning := retention_warning(self.settings, archive_dir(self.data)):
                self.report(warning)

        if isinstance(self.kafka, KafkaBroker):
            return [supervised(replace(kafka_startup(self.kafka), after_healthy=create_topics))]
        self.kafka.processes()  # the cluster id, configs and formatted dirs, once for every node
        nodes = self.kafka.nodes
        return [
            PartSpec(
                node.name,
                node.process,
                150,  # 3 JVMs starting at once on 2 cores
                after_healthy=create_topics if node is nodes[-1] else None,
                url=node.bootstrap,
            )
            for node in nodes
        ]

    def services(self) -> Services:
        """The services as this stack runs them (its ports, its brokers' accounts and shards)."""
        return Services.on_brokers(
            self.settings,
            self.mosquittos,
            logs=self.logs,
            data=self.data,
            command_api_port=self.ports.command_api,
            query_api_port=self.ports.query_api,
            extra_env=self.service_env,
        )

    def part_specs(self) -> list[PartSpec]:
        """Every part in start order, each with what it needs healthy before it (re)starts."""
        kafka = self.kafka_parts()
        brokers = [p.name for p in kafka]
        services = self.services()
        mosquittos = ["mosquitto", *(f"mosquitto-{shard.name}" for shard in services.more_shards)]
        gateways = ["device-gateway", *(f"device-gateway-{shard.name}" for shard in services.more_shards)]
        needs = {
            "broker-access": [*brokers, "mosquitto"],  # writes the broker's access files, makes it reload
            "device-actor": brokers,
            "device-gateway": [*brokers, "mosquitto", "broker-access"],
            "projector": [*brokers, "postgres", "redis"],
            "query-api": [*brokers, "postgres", "redis"],  # it follows the token revocations
            "command-api": brokers,
            "automations": brokers,  # schedules: the home journal in, commands to the inbox
            "campaigns": brokers,  # the firmware campaign driver (hearth_campaigns)
            "simulator": [*brokers, "command-api", *mosquittos, *gateways],
            "analytics": brokers,
            "archive": brokers,
        }
        for shard in services.more_shards:  # each shard's own follower and gateways, on its own broker
            mosquitto, follower = f"mosquitto-{shard.name}", f"broker-access-{shard.name}"
            needs[follower] = [*brokers, mosquitto]
            needs[f"device-gateway-{shard.name}"] = [*brokers, mosquitto, follower]
        specs = [
            *kafka,
            *(
                supervised(mosquitto_startup(broker, name))
                for broker, name in zip(self.mosquittos, mosquittos, strict=True)
            ),
            supervised(postgres_startup(self.postgres)),
            supervised(redis_startup(self.redis)),
        ]
        names = services.names(
            simulate=self.simulate,
            analytics=self.analytics,
            more_shards=services.more_shards,
            device_actors=self.device_actors,
            query_apis=self.query_apis,
        )
        for name in names:
            specs.append(services.spec(name, depends_on=needs[instance_part(name)[0]]))
        return specs

    def start(self) -> None:
        """Start every part in order; on any failure stop what started and raise StartupError."""
        self.check_ports()
        self.home.mkdir(parents=True, exist_ok=True)
        self.check_kafka_shape()
        self.logs.mkdir(parents=True, exist_ok=True)
        self.supervisor = Supervisor(
            self.part_specs(),
            policy=self.policy,
            report=self._report,
            on_change=lambda parts: write_status(self.home, parts),
        )
        self.supervisor.start_all()

    def _report(self, message: str) -> None:
        """A line on the console and in the supervisor's log."""
        self.report(message)
        with open(self.logs / "supervisor.log", "a") as log:
            log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}\n")

    def check_kafka_shape(self) -> None:
        """One home, one journal: the views and the actor's state hold offsets of the Kafka they were
        made from, so a home made with one broker is not started on a new cluster (or the other way)."""
        made = {1} if (self.data / "kafka").exists() else set()
        if nodes := len(list((self.data / "kafka-cluster").glob("node-*"))):
            made.add(nodes)
        if made and self.brokers not in made:
            before = min(made)
            raise StartupError(
                f"{self.home} holds a stack made with --brokers {before}: its views follow that Kafka's "
                f"journal. Start it with --brokers {before}, or use another --stack-dir for {self.brokers}."
            )

    @property
    def parts(self) -> list[PartStatus]:
        return self.supervisor.snapshot() if self.supervisor is not None else []

    def supervise(self, stop: threading.Event) -> None:
        """Keep the parts running until ``stop`` is set (the caller then calls ``stop()``)."""
        assert self.supervisor is not None, "start() first"
        self.supervisor.run(stop)

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop_all()


# Services live in launch/service_processes.py, DEFAULT_HOME, token_secret and archive_dir in the CLI's
# stack_dir.py (the operator's commands read the same directory); the tests and benches import them from
# here too.
__all__ = [
    "DEFAULT_HOME",
    "LocalStack",
    "Services",
    "StackPorts",
    "StartupError",
    "archive_dir",
    "retention_warning",
    "token_secret",
]
