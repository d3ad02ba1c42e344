"""The projector on the real broker, PostgreSQL and Redis: every fact type into its views, rollups,
dead letters, and exactly once into PostgreSQL when the projector process is killed mid-stream."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest
from aiokafka import AIOKafkaConsumer
from redis.asyncio import Redis

from hearth_devstack.workload.journal_facts import JournalFacts, fill_journal
from hearth_read_models.projection.app import make_consumer
from hearth_read_models.projection.journal_source import Batching, JournalSource
from hearth_read_models.projection.live_sink import LiveSink
from hearth_read_models.projection.projector import Projector
from hearth_read_models.projection.view_store import ViewStore
from hearth_read_models.store.db import libpq_dsn, migrate
from hearth_shared.adapters.kafka import DeadLetters, KafkaWriter, make_producer
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain import evolve, twin_view
from hearth_shared.schema.events import (
    AnomalyDetected,
    AnomalyDetectedPayload,
    CommandAccepted,
    CommandAcknowledged,
    CommandConverged,
    CommandDispatched,
    CommandExpired,
    CommandFailed,
    CommandFailedPayload,
    CommandRef,
    CommandRejected,
    CommandRejectedPayload,
    CommandRequested,
    CommandRequestedPayload,
    CommandSuperseded,
    CommandSupersededPayload,
    ConnectivityPayload,
    DesiredSetPayload,
    DesiredStateSet,
    DeviceCameOnline,
    DeviceRegistered,
    DeviceRegisteredPayload,
    DeviceWentOffline,
    Event,
    StateReported,
    StateReportedPayload,
    encode,
)
from tests.support.waiting import eventually, poll_until

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


class Device:
    """Makes one device's facts, versions 1, 2, 3, ..."""

    def __init__(self, device_id: str, home_id: str) -> None:
        self.device_id, self.home_id, self.version = device_id, home_id, 0

    def __call__(self, cls: type[Event], payload: Any, command: uuid.UUID | None = None) -> Event:
        self.version += 1
        at = T0 + timedelta(seconds=self.version)
        return cls(  # type: ignore[call-arg]
            event_id=uuid.uuid4(), device_id=self.device_id, home_id=self.home_id, version=self.version,
            occurred_at=at, recorded_at=at, correlation_id=command, payload=payload,
        )  # fmt: skip


def every_fact_type(home: str) -> tuple[list[Event], dict[str, uuid.UUID]]:
    """A thermostat and a lock going through every fact type; the commands by what they end as."""
    th, lock = Device(f"{home}-th", home), Device(f"{home}-lock", home)
    c = {
        name: uuid.uuid4()
        for name in ("converged", "failed", "rejected", "expired", "superseded", "newer", "lock")
    }
    later = T0 + timedelta(minutes=5)

    def requested(d: Device, name: str, command: str, params: dict[str, Any]) -> Event:
        payload = CommandRequestedPayload(command_id=c[command], name=name, params=params, expires_at=later)
        return d(CommandRequested, payload, c[command])

    def step(d: Device, cls: type[Event], command: str, payload: Any = None) -> Event:
        """A command fact (by default its payload only names the command)."""
        return d(cls, payload or CommandRef(command_id=c[command]), c[command])

    def desired(d: Device, setting: str, command: str, values: dict[str, Any]) -> Event:
        payload = DesiredSetPayload(command_id=c[command], desired=values, setting=setting)
        return step(d, DesiredStateSet, command, payload)

    def reported(d: Device, state: dict[str, Any], seq: int) -> Event:
        return d(StateReported, StateReportedPayload(reported=state, device_seq=seq, device_time=T0))

    failed = CommandFailedPayload(command_id=c["failed"], reason="device_error", message="no")
    rejected = CommandRejectedPayload(command_id=c["rejected"], reason="out_of_range", message="7-35")
    superseded = CommandSupersededPayload(command_id=c["superseded"], superseded_by=c["newer"])
    anomaly = AnomalyDetectedPayload(
        metric="ambient_c", value=35.5, score=5.1, threshold=3.0, model_version=4, device_time=T0
    )
    facts = [
        th(DeviceRegistered, DeviceRegisteredPayload(device_type="thermostat", name="Hall")),
        reported(th, {"ambient_c": 20.5, "humidity_pct": 41.0}, 1),
        requested(th, "set_target_temperature", "converged", {"target_c": 21.5}),
        step(th, CommandAccepted, "converged"),
        desired(th, "target", "converged", {"target_c": 21.5}),
        step(th, CommandDispatched, "converged"),
        step(th, CommandAcknowledged, "converged"),
        reported(th, {"target_c": 21.5}, 2),
        step(th, CommandConverged, "converged"),
        requested(th, "set_hvac_mode", "failed", {"mode": "heat"}),
        step(th, CommandAccepted, "failed"),
        desired(th, "hvac_mode", "failed", {"hvac_mode": "heat"}),
        step(th, CommandDispatched, "failed"),
        step(th, CommandFailed, "failed", failed),
        requested(th, "set_target_temperature", "rejected", {"target_c": 99}),
        step(th, CommandRejected, "rejected", rejected),
        requested(th, "set_target_temperature", "expired", {"target_c": 19.0}),
        step(th, CommandExpired, "expired"),
        requested(th, "set_target_temperature", "superseded", {"target_c": 18.0}),
        step(th, CommandAccepted, "superseded"),
        requested(th, "set_target_temperature", "newer", {"target_c": 22.0}),
        step(th, CommandAccepted, "newer"),
        step(th, CommandSuperseded, "superseded", superseded),
        th(AnomalyDetected, anomaly),
        th(DeviceWentOffline, ConnectivityPayload(last_seen=T0)),
        th(DeviceCameOnline, ConnectivityPayload(last_seen=T0 + timedelta(hours=1))),
        lock(DeviceRegistered, DeviceRegisteredPayload(device_type="lock", name="Front")),
        requested(lock, "lock", "lock", {}),
        step(lock, CommandAccepted, "lock"),
        desired(lock, "lock", "lock", {"lock_state": "locked"}),
        step(lock, CommandDispatched, "lock"),
        step(lock, CommandAcknowledged, "lock"),
        reported(lock, {"lock_state": "locked"}, 1),
        step(lock, CommandConverged, "lock"),
    ]
    return facts, c


async def produce(stack: StackSettings, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = make_producer(stack.kafka_bootstrap_servers, "test")
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


async def produce_facts(stack: StackSettings, facts: list[Event]) -> None:
    await produce(stack, stack.topics.journal, [(e.device_id.encode(), encode(e)) for e in facts])


@asynccontextmanager
async def running_projector(
    stack: StackSettings, schema: str, batch_size: int = 500
) -> AsyncIterator[Projector]:
    """A live projector of the test's journal into ``schema``, running in a task of this loop."""
    await asyncio.to_thread(migrate, stack.postgres_dsn, schema)
    consumer = make_consumer(stack)
    journal = KafkaWriter(stack.kafka_bootstrap_servers, stack.topics, client_id="test-projector")
    redis = Redis.from_url(stack.redis_url)
    await consumer.start()
    await journal.start()
    projector = Projector(
        JournalSource(
            consumer,
            stack.topics.journal,
            rollups=stack.topics.rollups,
            home_journal=stack.topics.home_journal,
            batching=Batching(size=batch_size),
        ),
        ViewStore(stack.postgres_dsn, schema, "projector"),
        LiveSink(redis),
        dead_letters=DeadLetters(journal, consumer="test-projector"),
    )
    task: asyncio.Task[None] | None = None
    try:
        await projector.start()
        task = asyncio.create_task(projector.run())
        yield projector
    finally:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if not task.cancelled() and task.exception():
                raise task.exception()  # type: ignore[misc]
        await projector.stop()
        await consumer.stop()
        await journal.stop()
        await redis.aclose()


async def caught_up(projector: Projector, timeout_s: float = 60) -> None:
    """Until the projector has committed everything in its topics as they are now."""
    ends = await projector.consumer.end_offsets(projector.tps)
    await eventually(
        lambda: all(projector.positions.get(tp, 0) >= end for tp, end in ends.items()),
        f"the projector to commit up to {ends}",
        timeout_s=timeout_s,
        shown=lambda: projector.positions,
    )


def query(dsn: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(libpq_dsn(dsn)) as conn:
        return conn.execute(sql, args).fetchall()


def schema_of(stack: StackSettings) -> str:
    return f"rm_{stack.topic_prefix}"


async def test_every_fact_type_reaches_its_views(stack: StackSettings) -> None:
    home = f"h-{stack.topic_prefix}"
    facts, commands = every_fact_type(home)
    schema = schema_of(stack)
    redis = Redis.from_url(stack.redis_url)
    pubsub = redis.pubsub()
    await pubsub.subscribe(f"home:{home}")
    await produce_facts(stack, facts)
    async with running_projector(stack, schema) as projector:
        await caught_up(projector)
    dsn = stack.postgres_dsn

    twins = dict(query(dsn, f"SELECT device_id, view FROM {schema}.twins"))
    expected: dict[str, Any] = {}
    for e in facts:
        expected[e.device_id] = evolve(expected.get(e.device_id), e)
    assert twins == {d: msgspec.json.decode(msgspec.json.encode(twin_view(tw))) for d, tw in expected.items()}
    th = twins[f"{home}-th"]
    assert th["version"] == 26 and th["desired"] == {"target_c": 21.5, "hvac_mode": "heat"}
    assert th["delta"] == {"hvac_mode": "heat"} and th["connectivity"]["online"] is True
    assert twins[f"{home}-lock"]["reported"]["lock_state"] == "locked"

    history = query(
        dsn, f"SELECT device_id, version, event_id, type, correlation_id, event FROM {schema}.device_events"
    )
    assert sorted((d, v) for d, v, *_ in history) == sorted((e.device_id, e.version) for e in facts)
    by_key = {(e.device_id, e.version): e for e in facts}
    for device_id, version, event_id, type_, correlation_id, event in history:
        fact = by_key[(device_id, version)]
        assert (event_id, type_, correlation_id) == (fact.event_id, fact.type, fact.correlation_id)
        assert event == msgspec.json.decode(encode(fact))

    statuses = dict(query(dsn, f"SELECT command_id, status FROM {schema}.commands"))
    assert statuses == {
        commands["converged"]: "converged",
        commands["failed"]: "failed",
        commands["rejected"]: "rejected",
        commands["expired"]: "expired",
        commands["superseded"]: "superseded",
        commands["newer"]: "accepted",
        commands["lock"]: "converged",
    }
    [(reason, steps)] = query(
        dsn, f"SELECT reason, history FROM {schema}.commands WHERE command_id = %s", commands["rejected"]
    )
    assert reason == "out_of_range" and [s["status"] for s in steps] == ["pending", "rejected"]
    [(steps,)] = query(
        dsn, f"SELECT history FROM {schema}.commands WHERE command_id = %s", commands["converged"]
    )
    assert [s["status"] for s in steps] == ["pending", "accepted", "dispatched", "acknowledged", "converged"]
    [(reason,)] = query(
        dsn, f"SELECT reason FROM {schema}.commands WHERE command_id = %s", commands["failed"]
    )
    assert reason == "device_error"

    [alert] = query(
        dsn, f"SELECT device_id, metric, value, score, threshold, model_version FROM {schema}.alerts"
    )
    assert alert == (f"{home}-th", "ambient_c", 35.5, 5.1, 3.0, 4)

    assert msgspec.json.decode(await redis.get(f"twin:{home}-th") or b"") == th  # the cache holds the view
    changes: list[dict[str, Any]] = []
    while len(changes) < len(facts):
        message = await asyncio.wait_for(pubsub.get_message(ignore_subscribe_messages=True, timeout=5), 10)
        if message:
            changes.append(msgspec.json.decode(message["data"]))
    assert [(m["type"], m["device_id"], m["version"]) for m in changes if m["device_id"].endswith("-th")] == [
        ("change", f"{home}-th", v) for v in range(1, 27)
    ]
    [last] = [
        m for m in changes if (m["device_id"], m["version"]) == (facts[-1].device_id, facts[-1].version)
    ]
    assert last["event"] == msgspec.json.decode(encode(facts[-1]))
    assert last["twin"] == twins[facts[-1].device_id]
    await pubsub.aclose()  # type: ignore[no-untyped-call]
    await redis.aclose()


async def test_rollups_are_replaced_by_key_and_deleted_by_tombstones(stack: StackSettings) -> None:
    schema = schema_of(stack)
    key = "device:th-1:1m:2026-11-22T10:15:00Z"
    gone = "home:h-1:15m:2026-11-22T10:15:00Z"
    first = {"scope": "device", "device_id": "th-1", "window": "1m", "readings": 1}
    await produce(
        stack,
        stack.topics.rollups,
        [
            (key.encode(), msgspec.json.encode(first)),
            (gone.encode(), b'{"scope": "home", "home_id": "h-1", "readings": 3}'),
            (key.encode(), msgspec.json.encode({**first, "readings": 2})),
            (gone.encode(), None),
        ],
    )
    async with running_projector(stack, schema) as projector:
        await caught_up(projector)
    rows = query(
        stack.postgres_dsn,
        f'SELECT key, scope, subject_id, "window", window_start, value FROM {schema}.rollups',
    )
    assert rows == [
        (key, "device", "th-1", "1m", datetime(2026, 11, 22, 10, 15, tzinfo=UTC), {**first, "readings": 2})
    ]


async def test_malformed_records_go_to_dead_letters_and_projection_goes_on(stack: StackSettings) -> None:
    schema, home = schema_of(stack), f"h-{stack.topic_prefix}"
    good = Device(f"{home}-th", home)
    orphan = Device(f"{home}-orphan", home)
    orphan.version = 4
    registered = DeviceRegisteredPayload(device_type="thermostat", name="n")
    await produce(
        stack,
        stack.topics.journal,
        [
            (b"x", b"{not json"),
            (b"x", b'{"type": "device.exploded", "device_id": "x"}'),
            (orphan.device_id.encode(), encode(orphan(DeviceCameOnline, ConnectivityPayload(last_seen=T0)))),
            (good.device_id.encode(), encode(good(DeviceRegistered, registered))),
        ],
    )
    await produce(stack, stack.topics.rollups, [(b"no-colons", b"{}")])
    async with running_projector(stack, schema) as projector:
        await caught_up(projector)
        assert projector.stats.dead_letters == 4
    assert query(stack.postgres_dsn, f"SELECT device_id, version FROM {schema}.twins") == [
        (good.device_id, 1)
    ]

    consumer = AIOKafkaConsumer(
        stack.topics.dead_letters,
        bootstrap_servers=stack.kafka_bootstrap_servers,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        letters: list[dict[str, Any]] = []
        while len(letters) < 4:
            batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
            letters += [msgspec.json.decode(r.value) for rs in batch.values() for r in rs]
    finally:
        await consumer.stop()
    assert sorted((d["source_topic"], d["reason"]) for d in letters) == sorted(
        [
            (stack.topics.journal, "invalid_json"),
            (stack.topics.journal, "unknown_type"),
            (stack.topics.journal, "unknown_device"),
            (stack.topics.rollups, "invalid_rollup_key"),
        ]
    )
    assert all(d["consumer"] == "test-projector" and d["value"] for d in letters)


def projector_process(stack: StackSettings, schema: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "HEARTH_KAFKA_BOOTSTRAP_SERVERS": stack.kafka_bootstrap_servers,
        "HEARTH_TOPIC_PREFIX": stack.topic_prefix,
        "HEARTH_POSTGRES_DSN": stack.postgres_dsn,
        "HEARTH_REDIS_URL": stack.redis_url,
        "HEARTH_READ_MODELS_SCHEMA_NAME": schema,
        "HEARTH_READ_MODELS_BATCH_SIZE": "300",  # many small transactions: a kill lands inside one
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "hearth_read_models", "projector"], env=env, stdout=out, stderr=out
        )


async def projected(stack: StackSettings, schema: str) -> int:
    rows = await asyncio.to_thread(
        query, stack.postgres_dsn, f"SELECT coalesce(sum(next_offset), 0) FROM {schema}.consumed_offsets"
    )
    return int(rows[0][0])


async def wait_projected(stack: StackSettings, schema: str, at_least: int, timeout_s: float = 120) -> int:

    async def done() -> int:
        try:
            return await projected(stack, schema)
        except psycopg.errors.UndefinedTable:  # not migrated yet
            return 0

    return await poll_until(
        done, lambda n: n >= at_least, f"{at_least} records projected", timeout_s=timeout_s
    )


async def test_a_killed_projector_loses_nothing_and_doubles_nothing(
    stack: StackSettings, tmp_path: Path
) -> None:
    schema, total = schema_of(stack), 30_000
    facts = list(itertools.islice(iter(JournalFacts(60, prefix=stack.topic_prefix)), total))
    await fill_journal(stack, iter(facts), total)
    log = tmp_path / "projector.log"
    for kill_at in (4_000, 15_000):
        process = projector_process(stack, schema, log)
        try:
            await wait_projected(stack, schema, kill_at)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(10)
    assert await projected(stack, schema) < total, "the projector finished before it was killed"
    process = projector_process(stack, schema, log)
    try:
        await wait_projected(stack, schema, total)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()[-3000:]
    assert log.read_text().count("starts at") == 3

    dsn = stack.postgres_dsn
    history = query(dsn, f"SELECT device_id, version, event_id FROM {schema}.device_events")
    assert len(history) == total
    assert sorted(history) == sorted((e.device_id, e.version, e.event_id) for e in facts)
    twins: dict[str, Any] = {}
    for e in facts:
        twins[e.device_id] = evolve(twins.get(e.device_id), e)
    views = dict(query(dsn, f"SELECT device_id, view FROM {schema}.twins"))
    assert views == {d: msgspec.json.decode(msgspec.json.encode(twin_view(tw))) for d, tw in twins.items()}
    [(commands, converged)] = query(
        dsn, f"SELECT count(*), count(*) FILTER (WHERE status = 'converged') FROM {schema}.commands"
    )
    requested = sum(isinstance(e, CommandRequested) for e in facts)
    assert commands == requested and converged >= requested - 60  # the last command of a device may be open
    [(alerts,)] = query(dsn, f"SELECT count(*) FROM {schema}.alerts")
    assert alerts == sum(isinstance(e, AnomalyDetected) for e in facts)
