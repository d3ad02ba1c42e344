"""The Hearth services as child processes (``Services``), for ``hearth up`` and for the tests and
benchmarks alike: each service's command line, its environment (every HEARTH_* setting derived from the
stack's settings, ports and data directory), how to tell it is healthy, and how long it may take.

Each service gets its own directory for its topic followers' restart reports
(``HEARTH_FOLLOWER_REPORTS``, ``follower_reports_dir``: ``data/followers/<part>``), emptied whenever a
new run of it is made, so what ``hearth status`` shows is what the current run read at its start, never
a killed predecessor's figures. The device actor is healthy when it serves (its serving file, see
``hearth_device_actor.adapters.serving``), not merely once its worker has started.

MQTT broker shards: the first broker is the one ``mqtt_*`` names; each of ``more_shards`` (``ShardBroker``)
is one more, with its own broker-access follower and gateway, named after the shard (``broker-access-1``,
``device-gateway-1``), and every service is told the shards (``HEARTH_MQTT_SHARDS``).

Several processes of one service (``SCALED_PARTS``: device-actor workers, query-API processes; ``hearth up
--device-actors 3 --query-apis 2``): the first keeps the service's name, the n-th (from 2) is the part
``{service}.{n}``, with a name of its own that stays the same across its restarts: an actor worker's data
directory (``data/device-actor.2``: its serving file, faust's state) and its Kafka static membership
(``HEARTH_DEVICE_ACTOR_INSTANCE``), so a restarted worker rejoins as itself; a query API's port, the
first's + n - 1 (``instance_port``; a load balancer in front of them on a real cluster). Gateways scale
per MQTT shard instead (a shard each, see above).

Apart from the local stack (``local.py``), which supervises them beside the servers, because the tests'
fixtures and ``hearth_bench.harness.stack`` start the same services on their own temporary servers. They start
them with ``services_running``, the one start loop outside the supervisor: every service it started is
stopped when the block ends, or when a start fails, so a failed start leaves no process behind.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from hearth.support.stack_dir import archive_dir
from hearth_device_actor.adapters.serving import serving_file, serving_problem
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_devstack.supervision.process import ManagedProcess, stop_together
from hearth_devstack.supervision.supervisor import PartSpec
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.topic_follower import REPORTS_ENV
from hearth_shared.schema.mqtt import DEVICE_PORT, PLATFORM_PORT
from hearth_shared.schema.shards import DEFAULT_SHARD

# The parts each MQTT shard has of its own: ``broker-access`` and ``device-gateway`` serve the first shard,
# ``broker-access-1`` ... the others.
SHARD_PARTS = ("broker-access", "device-gateway")
# The services the stack may run several processes of (see the module docstring).
SCALED_PARTS = ("device-actor", "query-api")


def instance_part(name: str) -> tuple[str, int]:
    """(the service, which of its processes, from 1) of a part name: ``query-api.2`` is the second query
    API, ``query-api`` the first."""
    service, dot, n = name.rpartition(".")
    if dot and service in SCALED_PARTS and n.isdigit() and int(n) > 1:
        return service, int(n)
    return name, 1


def instance_names(service: str, count: int) -> list[str]:
    """The part names of ``count`` processes of a service: ``device-actor``, ``device-actor.2``, ..."""
    return [service, *(f"{service}.{n}" for n in range(2, count + 1))]


def instance_port(first: int, n: int) -> int:
    """The port of a service's n-th process (from 1), when each needs its own: the first's + n - 1."""
    return first + n - 1


def follower_reports_dir(data: Path, part: str) -> Path:
    """Where a part's topic followers write their restart reports (``HEARTH_FOLLOWER_REPORTS``)."""
    return data / "followers" / part


def actor_serving(data_dir: Path, bootstrap_servers: str) -> Callable[[], bool]:
    """Healthy while the device-actor worker with this data directory serves (``serving_problem``)."""
    path = serving_file(data_dir)

    def check() -> bool:
        return serving_problem(path, bootstrap_servers) is None

    return check


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


@dataclass(frozen=True)
class ShardBroker:
    """One more MQTT broker shard of the stack: its name, listeners and access files (``MosquittoBroker``:
    ``port``, ``platform_port``, ``access_dir``, ``pid_file``)."""

    name: str
    port: int
    platform_port: int
    access_dir: Path
    pid_file: Path

    @classmethod
    def of(cls, name: str, broker: MosquittoBroker) -> ShardBroker:
        return cls(name, broker.port, broker.platform_port, broker.access_dir, broker.pid_file)


def shard_part(name: str) -> tuple[str, str]:
    """(the service, its shard) of a part name: ``device-gateway-1`` is shard 1's gateway."""
    for base in SHARD_PARTS:
        if name.startswith(f"{base}-"):
            return base, name.removeprefix(f"{base}-")
    return name, DEFAULT_SHARD


@dataclass
class Services:
    """The Hearth services as child processes, for `hearth up` and for the tests alike."""

    settings: StackSettings
    logs: Path
    data: Path
    command_api_port: int = 8000
    query_api_port: int = 8001
    mqtt_port: int = DEVICE_PORT  # the devices' listener (what the command API tells devices)
    mqtt_platform_port: int = PLATFORM_PORT  # the service accounts' listener (gateway, follower, simulator)
    mqtt_password: str = ""  # the broker account of Hearth's own components (the device gateway)
    # The broker's access files and pid (MosquittoBroker.access_dir, .pid_file): the broker-access follower's.
    mqtt_access_dir: Path | None = None
    mqtt_pid_file: Path | None = None
    mqtt_simulator_password: str = ""  # the simulator hub's account (MosquittoBroker.simulator)
    more_shards: list[ShardBroker] = field(default_factory=list)  # MQTT brokers beyond the first
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def on_brokers(
        cls,
        settings: StackSettings,
        brokers: Sequence[MosquittoBroker],
        *,
        logs: Path,
        data: Path,
        command_api_port: int,
        query_api_port: int,
        extra_env: dict[str, str] | None = None,
    ) -> Services:
        """The services on these MQTT brokers: the first is shard 0 (its listeners and accounts are the
        services' own), each next one the shard named by its place (``1``, ``2``, ...)."""
        first = brokers[0]
        return cls(
            settings,
            logs=logs,
            data=data,
            command_api_port=command_api_port,
            query_api_port=query_api_port,
            mqtt_port=first.port,
            mqtt_platform_port=first.platform_port,
            mqtt_password=first.admin.password,
            mqtt_access_dir=first.access_dir,
            mqtt_pid_file=first.pid_file,
            mqtt_simulator_password=first.simulator.password,
            more_shards=[ShardBroker.of(str(i), broker) for i, broker in enumerate(brokers) if i > 0],
            extra_env=extra_env or {},
        )

    def shards_setting(self) -> dict[str, str]:
        """``HEARTH_MQTT_SHARDS`` when there is more than one broker (else nothing: one broker, shard 0)."""
        if not self.more_shards:
            return {}
        shards = {DEFAULT_SHARD: (self.mqtt_port, self.mqtt_platform_port)}
        shards |= {shard.name: (shard.port, shard.platform_port) for shard in self.more_shards}
        setting = {
            name: {"device_url": f"mqtt://127.0.0.1:{port}", "platform_url": f"mqtt://127.0.0.1:{platform}"}
            for name, (port, platform) in shards.items()
        }
        return {"HEARTH_MQTT_SHARDS": json.dumps(setting)}

    def shard_env(self, name: str) -> dict[str, str]:
        """A shard's own follower's or gateway's settings (none for the first shard's: ``env`` has them)."""
        base, shard_name = shard_part(name)
        shard = next((s for s in self.more_shards if s.name == shard_name), None)
        if shard is None:
            return {}
        if base == "broker-access":
            return {
                "HEARTH_BROKER_ACCESS_SHARD": shard.name,
                "HEARTH_BROKER_ACCESS_ACCESS_DIR": str(shard.access_dir),
                "HEARTH_BROKER_ACCESS_PID_FILE": str(shard.pid_file),
                "HEARTH_BROKER_ACCESS_MQTT_PORT": str(shard.platform_port),
            }
        return {
            "HEARTH_DEVICE_GATEWAY_SHARD": shard.name,
            "HEARTH_DEVICE_GATEWAY_MQTT_PORT": str(shard.platform_port),
            "HEARTH_DEVICE_GATEWAY_INSTANCE": f"gateway-shard-{shard.name}",
        }

    def instance_env(self, name: str) -> dict[str, str]:
        """The n-th process's own settings (none for the first: ``env`` has them; see the module)."""
        service, n = instance_part(name)
        if n == 1:
            return {}
        if service == "device-actor":
            return {
                "HEARTH_DEVICE_ACTOR_DATA_DIR": str(self.data / name),
                "HEARTH_DEVICE_ACTOR_INSTANCE": f"device-actor-{self.data.name}-{n}",
            }
        return {"HEARTH_READ_MODELS_PORT": str(instance_port(self.query_api_port, n))}

    def env(self) -> dict[str, str]:
        s = self.settings
        broker = self.data / "mosquitto"  # LocalStack's MosquittoBroker data dir
        return {
            "HEARTH_KAFKA_BOOTSTRAP_SERVERS": s.kafka_bootstrap_servers,
            "HEARTH_KAFKA_REPLICATION_FACTOR": str(s.kafka_replication_factor),
            "HEARTH_TOPIC_PREFIX": s.topic_prefix,
            "HEARTH_POSTGRES_DSN": s.postgres_dsn,
            "HEARTH_REDIS_URL": s.redis_url,
            "HEARTH_TOKEN_SECRET": s.token_secret,
            "HEARTH_COMMAND_API_PORT": str(self.command_api_port),
            "HEARTH_READ_MODELS_PORT": str(self.query_api_port),
            "HEARTH_DEVICE_ACTOR_DATA_DIR": str(self.data / "device-actor"),
            "HEARTH_DEVICE_ACTOR_INSTANCE": f"device-actor-{self.data.name}",  # one worker per data dir
            "HEARTH_DEVICE_GATEWAY_MQTT_PORT": str(self.mqtt_platform_port),
            "HEARTH_DEVICE_GATEWAY_MQTT_PASSWORD": self.mqtt_password,
            "HEARTH_COMMAND_API_MQTT_URL": f"mqtt://127.0.0.1:{self.mqtt_port}",
            "HEARTH_SIMULATOR_MQTT_PORT": str(self.mqtt_platform_port),
            "HEARTH_SIMULATOR_MQTT_PASSWORD": self.mqtt_simulator_password,
            "HEARTH_BROKER_ACCESS_ACCESS_DIR": str(self.mqtt_access_dir or broker / "access"),
            "HEARTH_BROKER_ACCESS_PID_FILE": str(self.mqtt_pid_file or broker / "mosquitto.pid"),
            "HEARTH_AUTOMATIONS_HEARTBEAT_FILE": str(self.data / "automations.heartbeat"),
            "HEARTH_BROKER_ACCESS_MQTT_PORT": str(self.mqtt_platform_port),
            "HEARTH_BROKER_ACCESS_MQTT_PASSWORD": self.mqtt_password,
            "HEARTH_ANALYTICS_CHECKPOINT_DIR": str(self.data / "analytics" / "checkpoints"),
            "HEARTH_ANALYTICS_OUTPUT_DIR": str(self.data / "analytics" / "reports"),
            "HEARTH_ANALYTICS_ARCHIVE_URL": str(archive_dir(self.data)),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONUNBUFFERED": "1",
            **self.shards_setting(),
            **self.extra_env,
        }

    @staticmethod
    def names(
        *,
        simulate: bool,
        analytics: bool = False,
        devices_over_mqtt: bool = True,
        more_shards: Sequence[ShardBroker] = (),
        device_actors: int = 1,
        query_apis: int = 1,
    ) -> list[str]:
        """The services in start order, with each of ``more_shards``' follower and gateway, and
        ``device_actors`` workers and ``query_apis`` query-API processes (``instance_names``).
        ``devices_over_mqtt=False``: without the broker-access followers and the device gateways (for
        tests whose devices talk to the inbox directly)."""
        shards = [f"-{shard.name}" for shard in more_shards]
        followers = [f"broker-access{s}" for s in ["", *shards]] if devices_over_mqtt else []
        gateways = [f"device-gateway{s}" for s in ["", *shards]] if devices_over_mqtt else []
        actors = instance_names("device-actor", device_actors)
        names = [*followers, *actors, *gateways, "projector", *instance_names("query-api", query_apis)]
        names += ["command-api", "automations", "campaigns"]
        return names + ["simulator"] * simulate + ["analytics", "archive"] * analytics

    def part(self, name: str) -> tuple[ManagedProcess, float]:
        """The process for one service (not started) and how long it may take to become healthy."""
        scaled, n = instance_part(name)
        api = f"http://127.0.0.1:{self.command_api_port}"
        query = f"http://127.0.0.1:{instance_port(self.query_api_port, n)}"
        log = self.logs / f"{name}.log"
        actor = actor_serving(self.data / name, self.settings.kafka_bootstrap_servers)
        service, _ = shard_part(scaled)
        argv, healthy, url, timeout_s = {
            "device-actor": (["hearth_device_actor"], actor, "", 90.0),
            "broker-access": (
                ["hearth_device_gateway.broker_access"],
                log_says(log, "broker access caught up"),
                "",
                60.0,
            ),
            "device-gateway": (["hearth_device_gateway"], log_says(log, "device gateway: ready"), "", 60.0),
            "projector": (["hearth_read_models", "projector"], log_says(log, "starts at"), "", 60.0),
            "query-api": (["hearth_read_models", "api"], http_ok(f"{query}/healthz"), query, 180.0),
            "command-api": (["hearth_command_api"], http_ok(f"{api}/healthz"), api, 120.0),
            "automations": (["hearth_automations"], log_says(log, "automations instance"), "", 90.0),
            "campaigns": (["hearth_campaigns"], log_says(log, "campaign driver: ready"), "", 90.0),
            "simulator": (["hearth_simulator"], log_says(log, "simulator: playing"), "", 60.0),
            "analytics": (["hearth_analytics", "stream"], log_says(log, "started hearth-training"), "", 300),
            "archive": (["hearth_analytics", "archive"], log_says(log, "started hearth-archive"), "", 300),
        }[service]
        reports = follower_reports_dir(self.data, name)
        shutil.rmtree(reports, ignore_errors=True)  # this run's reports only (see the module docstring)
        process = ManagedProcess(
            name=name,
            argv=[sys.executable, "-m", *argv],
            log_path=log,
            healthy=healthy,
            env={
                **self.env(),
                **self.shard_env(name),
                **self.instance_env(name),
                REPORTS_ENV: str(reports),
            },
            url=url,
        )
        return process, timeout_s

    def spec(self, name: str, *, depends_on: list[str]) -> PartSpec:
        """The service as a supervised part: each (re)start is a fresh process with a fresh health check."""
        process, timeout_s = self.part(name)
        return PartSpec(
            name,
            lambda: self.part(name)[0],
            timeout_s,
            depends_on=depends_on,
            url=process.url,
            reports=str(follower_reports_dir(self.data, name)),
        )


@contextmanager
def services_running(
    services: Services,
    names: Sequence[str],
    *,
    patience: float = 1.0,
    together: bool = False,
    report: Callable[[str], None] | None = None,
) -> Iterator[dict[str, ManagedProcess]]:
    """The services ``names`` (as in ``Services.part``), started in that order and each healthy within
    its start timeout times ``patience`` (more on a shared, busy machine), by name; stopped together
    (``stop_together``) when the block ends or a start fails. ``together``: start them all, then wait for
    each (they mostly wait for the broker). ``report`` hears a line as each one starts."""
    parts: dict[str, ManagedProcess] = {}
    waits: dict[str, float] = {}
    try:
        for name in names:
            if report is not None:
                report(f"starting {name} ...")
            parts[name], waits[name] = services.part(name)
            parts[name].start()
            if not together:
                parts[name].wait_healthy(waits[name] * patience)
        if together:
            for name, part in parts.items():
                part.wait_healthy(waits[name] * patience)
        yield parts
    finally:
        stop_together([part.stop for part in parts.values()])
