"""Fixtures: the real broker, PostgreSQL and Redis, started once per test session on free ports.

Each test that needs them gets its own topic prefix (so its own topics) and its own PostgreSQL schema;
tests of the whole platform share one set of running services (``platform``), each test using its own
homes and devices. Under pytest-xdist each worker is a session of its own, so each worker starts its own
servers, on its own free ports, in its own temporary directory; the tests that share the one Spark
session or the one browser run on one worker (tests/support/distribution.py).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from hearth_devstack.launch.server_startup import start_kafka, start_mosquitto, start_postgres, start_redis
from hearth_devstack.launch.service_processes import Services, services_running
from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_devstack.servers.postgres import PostgresServer
from hearth_devstack.servers.redis import RedisServer
from hearth_devstack.supervision.ports import FREE_PORTS_ENV, free_port, listener_ports
from hearth_shared.adapters.kafka import ensure_topics
from hearth_shared.adapters.settings import StackSettings
from tests.support.platform import Platform, make_settings

# Every JVM the tests start (the session's Kafka, the chaos stacks' brokers, the Spark driver) compiles
# with C1 only: measured on these 2 cores, the same tests took the brokers about half their CPU and the
# Spark driver 86 -> 50 CPU-s, and passed as before. Their JVMs live minutes and handle little data, so the
# C2 compiler's work never paid back; and a suite with 2 workers is bound by the machine's CPU. Only here:
# a platform run (`make up`, the benchmarks) keeps the JDK's defaults.
# C1 alone makes the JDK size its code cache as a client VM's, 48 MB: the Spark driver, which lives the
# whole session, filled it in CI (stop 37), the JVM disabled its compiler, and the next Spark job failed
# inside the JVM (`NoSuchMethodException ... MethodHandle.linkToStatic`, an adapter it could no longer
# generate). So the cache keeps the size the JDK gives a tiered VM (240 MB, reserved; used as filled).
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m")


def _worker_share_of_free_ports() -> None:
    """Each pytest-xdist worker takes its free ports from its own share of the range
    (``hearth_devstack.supervision.ports``): a port is chosen seconds before its part binds it, and two
    workers choosing from one range could choose the same one meanwhile. The worker's child processes
    (a `hearth up` of a chaos test) inherit its share."""
    worker, workers = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not workers or FREE_PORTS_ENV in os.environ:
        return
    whole = listener_ports()
    share = len(whole) // int(workers)
    first = whole.start + int(worker.removeprefix("gw")) * share
    os.environ[FREE_PORTS_ENV] = f"{first}-{first + share - 1}"


_worker_share_of_free_ports()

pytest_plugins = [
    "tests.support.durations",  # per-test durations kept from each run
    "tests.support.distribution",  # which tests share a worker, and the order they start in
]

if TYPE_CHECKING:
    from playwright.async_api import Browser
    from pyspark.sql import SparkSession

    from tests.support.identity_stack import Identity


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A test that used the shared platform and failed carries the tail of every service's log in its
    report: the platform's processes outlive the test, and their logs go with the session's temporary
    directory (a registration's `httpx.ReadError` in a CI-like run of 2026-11-30 left nothing to read)."""
    report: pytest.TestReport = yield
    platform = getattr(item, "funcargs", {}).get("platform")
    if report.failed and isinstance(platform, Platform):
        report.sections.append(("the platform's service logs (tails)", platform.logs()))
    return report


@pytest.fixture(scope="session")
def servers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("servers")


@pytest.fixture(scope="session")
def kafka(servers_dir: Path) -> Iterator[KafkaBroker]:
    started = start_kafka(servers_dir)
    yield started.server
    started.process.stop()


@pytest.fixture(scope="session")
def postgres(servers_dir: Path) -> Iterator[PostgresServer]:
    started = start_postgres(servers_dir)
    yield started.server
    started.process.stop()


@pytest.fixture(scope="session")
def redis_server(servers_dir: Path) -> Iterator[RedisServer]:
    started = start_redis(servers_dir)
    yield started.server
    started.process.stop()


@pytest.fixture(scope="session")
def mosquitto(servers_dir: Path) -> Iterator[MosquittoBroker]:
    """The MQTT broker (Debian's mosquitto) on free ports; ``mosquitto.admin`` is Hearth's own account."""
    started = start_mosquitto(servers_dir)
    yield started.server
    started.process.stop()


@pytest.fixture(scope="session")
def identity(
    kafka: KafkaBroker, postgres: PostgresServer, redis_server: RedisServer, servers_dir: Path
) -> Iterator[Identity]:
    """Device identity's own stack (broker, broker-access follower, device actor, command API)."""
    from tests.support.identity_stack import identity_stack

    with identity_stack(kafka, postgres, redis_server, servers_dir / "identity") as running:
        yield running


@pytest.fixture
async def stack(kafka: KafkaBroker, postgres: PostgresServer, redis_server: RedisServer) -> StackSettings:
    """Settings for one test: its own topics (created), sharing the session's servers."""
    settings = make_settings(kafka, postgres, redis_server, f"t{uuid.uuid4().hex[:10]}")
    await ensure_topics(settings.kafka_bootstrap_servers, settings.topics.specs())
    return settings


@pytest.fixture
async def broker_only(kafka: KafkaBroker) -> StackSettings:
    """Settings for one test that needs the broker alone: its own topics (created), and no PostgreSQL
    or Redis started for it."""
    settings = StackSettings(
        kafka_bootstrap_servers=kafka.bootstrap, topic_prefix=f"t{uuid.uuid4().hex[:10]}"
    )
    await ensure_topics(settings.kafka_bootstrap_servers, settings.topics.specs())
    return settings


@pytest.fixture(scope="session")
def platform(
    kafka: KafkaBroker,
    postgres: PostgresServer,
    redis_server: RedisServer,
    mosquitto: MosquittoBroker,
    servers_dir: Path,
) -> Iterator[Platform]:
    """The device actor, device gateway, projector, query API and command API, once per session, as real
    processes (the gateway on the session's MQTT broker)."""
    settings = make_settings(kafka, postgres, redis_server, "platform")
    asyncio.run(ensure_topics(settings.kafka_bootstrap_servers, settings.topics.specs()))
    services = Services.on_brokers(
        settings,
        [mosquitto],
        logs=servers_dir / "services",
        data=servers_dir / "services-data",
        command_api_port=free_port(),
        query_api_port=free_port(),
        extra_env={"HEARTH_DEVICE_ACTOR_OFFLINE_AFTER_S": "5", "HEARTH_DEVICE_ACTOR_SESSION_TIMEOUT_S": "6"},
    )
    # Twice the services' patience, as identity_stack: a shared, busy machine. All at once (each mostly
    # waits for the broker), as the local stack starts them: one by one, the platform took the sum of them.
    with services_running(services, services.names(simulate=False), patience=2, together=True) as parts:
        yield Platform(
            settings,
            f"http://127.0.0.1:{services.command_api_port}",
            f"http://127.0.0.1:{services.query_api_port}",
            parts,
        )


@pytest.fixture
def home() -> str:
    """A home of this test's own (its devices are nobody else's)."""
    return f"home-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def api(platform: Platform, home: str) -> AsyncIterator[httpx.AsyncClient]:
    """The command API with the token of the test's home."""
    async with platform.client(platform.command_api, home) as client:
        yield client


@pytest.fixture
async def query(platform: Platform, home: str) -> AsyncIterator[httpx.AsyncClient]:
    """The query API with the token of the test's home."""
    async with platform.client(platform.query_api, home) as client:
        yield client


@pytest.fixture
async def admin_api(platform: Platform) -> AsyncIterator[httpx.AsyncClient]:
    async with platform.client(platform.command_api) as client:
        yield client


# The tests' Spark evaluates expressions interpreted, without generated code (as Spark's own test suites
# can): the tests' data is tiny, so compiling each query's code (Janino, then a JIT kept at C1 above) cost
# more than it saved. Measured on 4 Spark modules run alone, 2 cores: 132 s -> 120 s, 154 -> 138 CPU-s.
# Jobs the tests start as processes of their own keep Spark's defaults, as in production.
INTERPRETED_SQL = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one SparkSession of the test session (local[2], the analytics job's own builder and Kafka jars).

    Starting Spark costs 6-30 s on two busy cores, so every analytics test (integration, e2e and chaos)
    shares it, on one xdist worker (tests/support/distribution.py); each test points its queries at its
    own topics and its own checkpoint directory. An s3a:// archive URL puts the s3a connector on the
    session's classpath (no bucket is named by it: test_archive_s3 sets its own bucket's endpoint and
    keys at runtime)."""
    from hearth_analytics.settings import AnalyticsSettings
    from hearth_analytics.spark import build_session

    settings = AnalyticsSettings(
        master="local[2]", shuffle_partitions=2, driver_memory="2g", spark_ui=False,
        archive_url="s3a://no-bucket/archive",
    )  # fmt: skip
    session = build_session(settings, "hearth-tests")
    for key, value in INTERPRETED_SQL.items():
        session.conf.set(key, value)
    yield session
    session.stop()


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    """The one Chromium of the test session (Debian's, driven by Playwright); each test opens its pages
    in a context of its own (``tests.support.live_browser.new_page``)."""
    from tests.support.live_browser import chromium

    async with chromium() as running:
        yield running
