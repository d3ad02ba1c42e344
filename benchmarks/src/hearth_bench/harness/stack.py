"""What the stack benches share: temporary servers and the services as processes (``bench_stack``),
thermostats registered through the command API, each part's CPU use, reading a topic back, the raw
consume rate of a topic (``raw_consume_rate``, the floor of the throughput benches), and a counting
progress bar. The client side (a lean HTTP client, pacing, percentiles) is
``hearth_bench.harness.load_client``.

``bench_stack`` starts a temporary Kafka broker (and PostgreSQL and Redis unless told not to), creates
the topics, starts the named services as real processes (``hearth_devstack.local.Services``) on free ports,
and stops everything again, in reverse order, when the block ends. A part that fails to start, or a
bench that fails, prints the tails of the service logs first (the temporary directory goes with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psutil
from aiokafka import AIOKafkaConsumer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from hearth_devstack.launch.server_startup import (
    ServerT,
    StartedServer,
    start_kafka,
    start_mosquitto,
    start_postgres,
    start_redis,
)
from hearth_devstack.launch.service_processes import Services, services_running
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_devstack.supervision.ports import free_port
from hearth_devstack.supervision.process import ManagedProcess, tail
from hearth_devstack.waiting import NotInTime, eventually, steadily
from hearth_shared.adapters.kafka import ensure_topics, topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.auth import create_token
from hearth_shared.schema.mqtt import SIMULATOR_ACCOUNT
from hearth_simulator.fleet import MqttEndpoint
from hearth_simulator.registration import register_fleet

console = Console(stderr=True)

QUIET_CORES = 0.5  # a measurement starts once the machine is less busy than this (cores) ...
CALM_S = 2.0  # ... for this long
QUIET_TIMEOUT_S = 120.0


@dataclass
class BenchStack:
    settings: StackSettings
    services: Services
    parts: dict[str, ManagedProcess]  # every process started (servers and services), by name

    @property
    def command_api(self) -> str:
        return f"http://127.0.0.1:{self.services.command_api_port}"

    @property
    def simulator_mqtt(self) -> MqttEndpoint:
        """The broker account an in-process simulator hub connects with (see ``bench_stack(mqtt=...)``)."""
        password = self.services.mqtt_simulator_password
        if not password:
            raise RuntimeError("this bench stack runs no MQTT broker: bench_stack(..., mqtt=True)")
        return MqttEndpoint("127.0.0.1", self.services.mqtt_platform_port, SIMULATOR_ACCOUNT, password)

    @property
    def query_api(self) -> str:
        return f"http://127.0.0.1:{self.services.query_api_port}"

    def token(self, home_id: str | None = None) -> str:
        """A token for one home, or an admin token."""
        return create_token(self.settings.token_secret, home_id=home_id, admin=home_id is None)

    def pid(self, name: str) -> int:
        proc = self.parts[name].proc
        assert proc is not None
        return proc.pid

    def check_running(self, *, but: str = "") -> None:
        """Raise if a part stopped (``but``: one the bench stopped on purpose)."""
        for name, part in self.parts.items():
            if not part.running and name != but:
                raise RuntimeError(f"{name} stopped during the bench:\n{tail(part.log_path)}")

    async def until(
        self, check: Callable[[], Any], what: str, timeout_s: float, *, every_s: float = 0.1
    ) -> Any:
        """What ``check()`` returns once it is truthy (``NotInTime`` after ``timeout_s``: the dev stack's
        one wait loop); a part that stopped meanwhile ends the wait at once, with its log's tail."""
        found: list[Any] = []

        def while_running() -> Any:
            self.check_running()
            found[:] = [check()]
            return found[0]

        await eventually(while_running, what, timeout_s=timeout_s, every_s=every_s)
        return found[0]

    async def quiet(
        self,
        *,
        below_cores: float = QUIET_CORES,
        for_s: float = CALM_S,
        timeout_s: float = QUIET_TIMEOUT_S,
        but: str = "",
    ) -> float | None:
        """Wait until the whole machine has been less busy than ``below_cores`` for ``for_s``: what a step
        before left the stack's parts to digest (a backlog, a journal's other readers) is done, so the next
        measurement has the machine to itself. Returns the seconds waited, None if it never was quiet
        within ``timeout_s`` (the measurement then runs anyway, and its figures say so). ``but``: a part
        stopped on purpose (``check_running``)."""
        last: list[float] = []

        def quiet() -> bool:  # busy CPU-seconds per second since the check before (none at the first)
            self.check_running(but=but)
            now, busy = time.monotonic(), self.cpu_seconds()["machine"]
            cores = (busy - last[1]) / (now - last[0]) if last else None
            last[:] = [now, busy]
            return cores is not None and cores < below_cores

        try:
            waited = await steadily(quiet, "a quiet machine", for_s=for_s, timeout_s=timeout_s, every_s=1.0)
        except NotInTime:
            return None
        return round(waited, 1)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) used so far by each part, its child processes included, by this
        process (``bench client``) and by the whole machine (``machine``, every process)."""
        used = {}
        for name in self.parts:
            with contextlib.suppress(psutil.Error, AssertionError):
                process = psutil.Process(self.pid(name))
                used[name] = sum(sum(p.cpu_times()[:2]) for p in [process, *process.children(recursive=True)])
        used["bench client"] = sum(psutil.Process().cpu_times()[:2])
        machine = psutil.cpu_times()
        used["machine"] = machine.user + machine.nice + machine.system + machine.irq + machine.softirq
        return used

    async def register_thermostats(self, home_id: str, count: int) -> list[str]:
        """Register ``count`` thermostats of one home through the command API (as `hearth up` does)."""
        return await self.register_fleet(home_id, {"thermostat": count})

    async def register_fleet(self, home_id: str, counts: Mapping[str, int]) -> list[str]:
        """Register simulated devices of one home, ``counts`` by type, through the command API."""
        return await register_fleet(self.command_api, self.token(), home_id, counts)

    async def wait_listed(
        self,
        home_id: str,
        count: int,
        *,
        online: bool,
        timeout_s: float = 120.0,
        where: Callable[[dict[str, Any]], bool] | None = None,
        what: str = "",
    ) -> None:
        """Wait until the query API lists ``count`` devices of the home (only online ones if ``online``;
        only twins ``where`` holds for, if given, e.g. a firmware version reported): registered and
        projected, and with ``online`` reporting through the simulator too."""
        params: dict[str, Any] = {"home_id": home_id, "limit": 1000}
        if online:
            params["online"] = "true"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        headers = {"Authorization": f"Bearer {self.token()}"}
        async with httpx.AsyncClient(base_url=self.query_api, headers=headers, timeout=30.0) as client:
            while True:
                listed, after = 0, None
                while True:
                    page = (await client.get("/v1/devices", params={**params, "after": after or ""})).json()
                    listed += sum(1 for twin in page["items"] if where is None or where(twin))
                    after = page["next_after"]
                    if not after:
                        break
                if listed >= count:
                    return
                if loop.time() > deadline:
                    what = what or ("online" if online else "projected")
                    raise RuntimeError(f"{listed} of {count} devices of {home_id} {what} after {timeout_s} s")
                self.check_running()
                await asyncio.sleep(0.5)


@contextlib.contextmanager
def bench_stack(
    name: str,
    *,
    services: Sequence[str],
    databases: bool = True,
    mqtt: bool = False,
    mqtt_brokers: int = 1,
    env: Mapping[str, str] | None = None,
) -> Iterator[BenchStack]:
    """Temporary servers plus the ``services`` (names as in ``Services.part``), for one bench run. With
    ``mqtt`` or the simulator (it plays its devices over MQTT, as real devices would), Mosquitto, the
    broker-access follower and a device gateway run too: ``mqtt_brokers`` of each (MQTT shards; the
    brokers' parts are named ``mosquitto``, ``mosquitto-1``, ...)."""
    with tempfile.TemporaryDirectory(prefix=f"hearth-bench-{name}-") as tmp:
        work = Path(tmp)
        parts: dict[str, ManagedProcess] = {}

        def started(name: str, server: Callable[[Path], StartedServer[ServerT]]) -> ServerT:
            console.print(f"[dim]starting {name} ...[/]")
            running = server(work)
            parts[running.process.name] = running.process
            return running.server

        try:
            broker = started("kafka", start_kafka)
            settings = StackSettings(
                kafka_bootstrap_servers=broker.bootstrap,
                topic_prefix=f"bench{secrets.token_hex(3)}",
                token_secret=secrets.token_urlsafe(24),
            )
            if databases:
                pg = started("postgres", start_postgres)
                redis = started("redis", start_redis)
                settings = settings.model_copy(update={"postgres_dsn": pg.dsn, "redis_url": redis.url})
            asyncio.run(ensure_topics(settings.kafka_bootstrap_servers, settings.topics.specs()))
            brokers = []
            if mqtt or "simulator" in services:
                first = started("mosquitto", start_mosquitto)
                brokers = [first]
                for i in range(1, mqtt_brokers):  # more shards, with the first one's accounts
                    brokers.append(started(f"mosquitto-{i}", partial(_shard_broker, i, first)))
                shard_parts = [
                    f"{s}-{i}" for i in range(1, mqtt_brokers) for s in ("broker-access", "device-gateway")
                ]
                needed = [s for s in ("broker-access", "device-gateway", *shard_parts) if s not in services]
                at = list(services).index("simulator") if "simulator" in services else len(services)
                services = [*services[:at], *needed, *services[at:]]
            # No broker-access follower without MQTT: nothing would say a device's secret was loaded.
            extra_env = {**({} if brokers else {"HEARTH_COMMAND_API_CREDENTIALS_WAIT_S": "0"}), **(env or {})}
            command_api_port, query_api_port, logs, data = (
                free_port(),
                free_port(),
                work / "logs",
                work / "data",
            )
            runner = (
                Services.on_brokers(
                    settings,
                    brokers,
                    logs=logs,
                    data=data,
                    command_api_port=command_api_port,
                    query_api_port=query_api_port,
                    extra_env=extra_env,
                )
                if brokers
                else Services(settings, logs, data, command_api_port, query_api_port, extra_env=extra_env)
            )
            with services_running(
                runner, services, report=lambda line: console.print(f"[dim]{line}[/]")
            ) as running:
                parts.update(running)
                yield BenchStack(settings, runner, parts)
        except BaseException:
            for part in parts.values():
                console.print(f"[red]--- {part.name} ({part.log_path.name})[/]\n{tail(part.log_path, 15)}")
            raise
        finally:
            for part in reversed(parts.values()):
                part.stop()


def _shard_broker(index: int, first: MosquittoBroker, work: Path) -> StartedServer[MosquittoBroker]:
    return start_mosquitto(work, f"mosquitto-{index}", accounts_dir=first.access_dir)


async def read_topic(settings: StackSettings, topic: str) -> AsyncIterator[bytes]:
    """Every record value of ``topic``, from its first offset up to its end offsets as they are now."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        enable_auto_commit=False,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    await consumer.start()
    try:
        tps = await topic_partitions(consumer, topic)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        left = [tp for tp in tps if end[tp] > 0]
        while left:
            batch = await consumer.getmany(*left, timeout_ms=1000, max_records=20_000)
            for tp, records in batch.items():
                for record in records:
                    yield record.value
                if records and records[-1].offset + 1 >= end[tp]:
                    left.remove(tp)
    finally:
        await consumer.stop()


async def raw_consume_rate(
    settings: StackSettings,
    topic: str,
    expected: int,
    *,
    max_records: int = 10_000,
    consumer: AIOKafkaConsumer | None = None,
) -> float:
    """The floor of the benches: records/s of a plain aiokafka read of ``topic`` from its first offset
    until ``expected`` records arrived, timed from the first record (``consumer``: one with a service's
    own settings, not started; default: aiokafka's defaults with 4 MB partition fetches)."""
    consumer = consumer or AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        enable_auto_commit=False,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    await consumer.start()
    try:
        tps = await topic_partitions(consumer, topic)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        seen, first = 0, 0.0
        while seen < expected:
            batch = await consumer.getmany(timeout_ms=1000, max_records=max_records)
            got = sum(len(records) for records in batch.values())
            if got and not first:
                first = time.perf_counter()
            seen += got
        return seen / (time.perf_counter() - first)
    finally:
        await consumer.stop()


def counting_progress() -> Progress:
    """The benches' progress bar for counted work: done/total, percent, time so far."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=console,
    )
