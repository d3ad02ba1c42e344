"""Rebuild and verify on the real broker, PostgreSQL and Redis, while a live projector and the query API
run: the rebuilt views equal the live ones, the swap loses and doubles nothing, and verify finds a
planted difference that a rebuild then repairs."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec
import pytest
from redis.asyncio import Redis

from hearth_devstack.workload.journal_facts import JournalFacts, fill_journal
from hearth_read_models.query.app import make_app
from hearth_read_models.rebuild.run import rebuild, verify
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.auth import create_token
from hearth_shared.schema.events import Event
from tests.integration.test_projector import caught_up, query, running_projector
from tests.support.home_history import AutomationHistory, write_home_facts
from tests.support.platform import SECRET
from tests.support.topics import pass_retention
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration
HISTORY_COLUMNS = ("event_id", "type", "home_id", "occurred_at", "recorded_at", "event")  # besides the key
RUN_COLUMNS = ("automation_id", "home_id", "ran_at", "journal_partition", "journal_offset", "run")
VIEW_TABLES = [
    "twins",
    "device_events",
    "commands",
    "alerts",
    "rollups",
    "automation_runs",
    "notification_outcomes",
]
NO_DIFFERENCES = dict.fromkeys(VIEW_TABLES, 0)


class Journal:
    """The test's journal: realistic facts of ``devices`` devices, appended on demand and counted."""

    def __init__(self, stack: StackSettings, devices: int) -> None:
        self.stack = stack
        self.facts: Iterator[Event] = iter(JournalFacts(devices, prefix=stack.topic_prefix))
        self.count = 0
        kinds = ("thermostat", "lock")
        self.devices = [f"{stack.topic_prefix}-{kinds[i % 2]}-{i:06d}" for i in range(devices)]

    async def append(self, n: int) -> None:
        await fill_journal(self.stack, self.facts, n)
        self.count += n


@asynccontextmanager
async def query_api(settings: ReadModelSettings) -> AsyncIterator[httpx.AsyncClient]:
    app = make_app(settings)
    headers = {"Authorization": f"Bearer {create_token(SECRET, admin=True)}"}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://query", headers=headers) as client:
            yield client


@asynccontextmanager
async def home_messages(stack: StackSettings) -> AsyncIterator[list[dict[str, Any]]]:
    """Every message published on the test's home channels while the block runs."""
    redis = Redis.from_url(stack.redis_url)
    pubsub = redis.pubsub()
    await pubsub.psubscribe(f"home:{stack.topic_prefix}-home-*")
    messages: list[dict[str, Any]] = []

    async def read() -> None:
        async for message in pubsub.listen():
            if message["type"] == "pmessage":
                messages.append(msgspec.json.decode(message["data"]))

    reader = asyncio.create_task(read())
    try:
        yield messages
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await redis.aclose()


def settings_for(stack: StackSettings) -> ReadModelSettings:
    return ReadModelSettings(stack=stack, schema_name=f"rm_{stack.topic_prefix}")


async def test_rebuild_swaps_in_while_the_live_projector_and_the_api_serve(stack: StackSettings) -> None:
    settings = settings_for(stack)
    journal = Journal(stack, 40)
    await journal.append(20_000)
    answers: dict[str, list[tuple[int, int]]] = defaultdict(list)
    stop = asyncio.Event()

    async def keep_writing() -> None:
        while not stop.is_set():
            await journal.append(300)
            await asyncio.sleep(0.05)

    async def keep_reading(api: httpx.AsyncClient) -> None:
        while not stop.is_set():
            for device_id in journal.devices[:5]:
                response = await api.get(f"/v1/devices/{device_id}")
                answers[device_id].append((response.status_code, response.json().get("version", -1)))
            await asyncio.sleep(0.02)

    async with home_messages(stack) as messages, running_projector(stack, settings.schema_name) as live:
        await caught_up(live)
        async with query_api(settings) as api:
            tasks = [asyncio.create_task(keep_writing()), asyncio.create_task(keep_reading(api))]
            result = await rebuild(settings, batch_size=4000)
            await asyncio.sleep(0.5)  # the live projector and the API go on after the swap
            stop.set()
            await asyncio.gather(*tasks)
        await caught_up(live)
        assert live.stats.reloads == 1  # it saw the new generation once and reloaded its positions
        await eventually(
            lambda: len(messages) >= journal.count,
            f"{journal.count} messages",
            timeout_s=30,
            every_s=0.1,
            shown=messages.__len__,
        )

    assert result.swapped and result.generation == 1 and all(c.ok for c in result.checks), result
    assert result.twins_refreshed == 0  # the rebuild changed no twin: the cache is left alone
    dsn, schema = stack.postgres_dsn, settings.schema_name
    [(events,)] = query(dsn, f"SELECT count(*) FROM {schema}.device_events")
    assert events == journal.count > 20_000
    assert query(dsn, "SELECT count(*) FROM pg_namespace WHERE nspname LIKE %s", f"{schema}_%") == [(0,)]

    # subscribers saw every change exactly once, in order, across the swap; no snapshot was published
    versions: dict[str, list[int]] = defaultdict(list)
    for m in messages:
        assert m["type"] == "change"
        versions[m["device_id"]].append(m["version"])
    assert sum(map(len, versions.values())) == journal.count
    assert all(v == list(range(1, len(v) + 1)) for v in versions.values())

    # the API answered every read, and a device's version never went back
    assert answers and all(status == 200 for a in answers.values() for status, _ in a)
    assert all(v == sorted(v) for v in ([version for _, version in a] for a in answers.values()))

    assert (await verify(settings)).counts == NO_DIFFERENCES


async def test_verify_finds_a_planted_difference_and_rebuild_repairs_it(stack: StackSettings) -> None:
    settings = settings_for(stack)
    journal = Journal(stack, 20)
    await journal.append(5_000)
    history = AutomationHistory(f"h-{stack.topic_prefix}")
    await write_home_facts(stack, [*history.created(), *history.more(30)])
    dsn, schema = stack.postgres_dsn, settings.schema_name
    changed, gap = journal.devices[0], journal.devices[1]
    lost_run, changed_outcome = history.runs[4].run_id, history.runs[6].actions[1].action_id  # delivered
    redis = Redis.from_url(stack.redis_url)
    async with running_projector(stack, schema) as live:
        await caught_up(live)
        [(view,)] = query(dsn, f"SELECT view FROM {schema}.twins WHERE device_id = %s", changed)
        evil = {**view, "name": "evil"}
        query(
            dsn,
            f"UPDATE {schema}.twins SET name = 'evil', view = %s WHERE device_id = %s RETURNING 1",
            msgspec.json.encode(evil).decode(),
            changed,
        )
        await redis.set(f"twin:{changed}", msgspec.json.encode(evil))
        query(
            dsn, f"DELETE FROM {schema}.device_events WHERE device_id = %s AND version = 3 RETURNING 1", gap
        )
        [(command,)] = query(
            dsn, f"UPDATE {schema}.commands SET status = 'failed' WHERE command_id = "
            f"(SELECT min(command_id::text)::uuid FROM {schema}.commands) RETURNING command_id",
        )  # fmt: skip
        query(dsn, f"DELETE FROM {schema}.automation_runs WHERE run_id = %s RETURNING 1", lost_run)
        query(
            dsn,
            f"UPDATE {schema}.notification_outcomes SET outcome = 'notification.gave_up', payload = '{{}}'"
            " WHERE notification_id = %s RETURNING 1",
            changed_outcome,
        )

        found = await verify(settings)
        assert found.counts == {
            **NO_DIFFERENCES, "twins": 1, "device_events": 1, "commands": 1, "automation_runs": 1,
            "notification_outcomes": 1,
        }  # fmt: skip
        assert {(d.table, d.key, d.kind, tuple(d.columns)) for d in found.differences} == {
            ("twins", changed, "differs", ("name", "view")),
            ("device_events", f"{gap}/3", "missing", HISTORY_COLUMNS),
            ("commands", str(command), "differs", ("status",)),
            ("automation_runs", str(lost_run), "missing", RUN_COLUMNS),
            ("notification_outcomes", str(changed_outcome), "differs", ("outcome", "payload")),
        }

        env = {
            **os.environ,
            "HEARTH_KAFKA_BOOTSTRAP_SERVERS": stack.kafka_bootstrap_servers,
            "HEARTH_TOPIC_PREFIX": stack.topic_prefix,
            "HEARTH_POSTGRES_DSN": stack.postgres_dsn,
            "HEARTH_REDIS_URL": stack.redis_url,
            "HEARTH_READ_MODELS_SCHEMA_NAME": schema,
            "COLUMNS": "200",
        }
        cli = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "from hearth.cli import main; main()", "verify",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        output = (await asyncio.wait_for(cli.communicate(), 120))[0].decode()
        assert cli.returncode == 1, output
        assert "5 rows differ" in output and changed in output

        async with home_messages(stack) as messages:
            repaired = await rebuild(settings, batch_size=2000)
            await asyncio.sleep(0.5)
        assert repaired.swapped and repaired.twins_refreshed == 1
        assert [(m["type"], m["device_id"], m["twin"]) for m in messages] == [("snapshot", changed, view)]
        assert msgspec.json.decode(await redis.get(f"twin:{changed}") or b"") == view
        await journal.append(500)  # the live projector goes on in the repaired views
        await caught_up(live)
        assert live.stats.reloads == 1

    # in one process too (the replay above ran its bulk in two, split by partition)
    assert (await verify(settings, processes=1)).counts == NO_DIFFERENCES
    [(events,)] = query(dsn, f"SELECT count(*) FROM {schema}.device_events")
    assert events == journal.count
    await redis.aclose()


async def test_runs_and_outcomes_the_home_journal_no_longer_holds_are_carried_over_by_a_rebuild(
    stack: StackSettings,
) -> None:
    """The home journal is not archived: once its head is gone, a rebuild takes the runs and outcomes of
    those records from the live views (``rebuild.home_carry``) and replays the rest; verify agrees."""
    settings = settings_for(stack)
    journal = Journal(stack, 4)
    await journal.append(400)
    history = AutomationHistory(f"h-{stack.topic_prefix}")
    await write_home_facts(stack, [*history.created(), *history.more(10)])
    dsn, schema = stack.postgres_dsn, settings.schema_name
    async with running_projector(stack, schema) as live:
        await caught_up(live)
        await pass_retention(stack.kafka_bootstrap_servers, stack.topics.home_journal)  # the head is gone
        await write_home_facts(stack, history.more(5))
        await caught_up(live)
        rebuilt = await rebuild(settings, batch_size=2000)
        assert rebuilt.swapped and all(c.ok for c in rebuilt.checks), rebuilt.checks
        await caught_up(live)
        assert (await verify(settings, processes=1)).counts == NO_DIFFERENCES
    runs = query(dsn, f"SELECT run_id FROM {schema}.automation_runs ORDER BY journal_offset")
    assert [run_id for (run_id,) in runs] == [r.run_id for r in history.runs]
    outcomes = query(dsn, f"SELECT notification_id::text, outcome FROM {schema}.notification_outcomes")
    assert dict(outcomes) == history.outcomes
