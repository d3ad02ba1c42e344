"""Automation runs and notification outcomes are history, projected from the home journal into
PostgreSQL by the live projector; the query API serves them from there and keeps none in memory.

On a real broker, PostgreSQL and Redis: an automation with more runs than the former in-memory bound,
each with a notification and its outcome, projected; then the query API starts from a snapshot saved by
the previous release (a home view with its runs in it) while the home journal's head is gone (a passed
retention window), so its automation can come only from the snapshot and its runs only from PostgreSQL.
It serves every run newest first, paged, with each notification's outcome (``sending`` while there is
none), and every delivery; its home view holds no runs, deliveries or unsent notifications, and after a
restart from its own snapshot it serves the same. A home-journal record that is not a home fact is a
dead letter with its reason, and the projection goes on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec
import pytest
from aiokafka import AIOKafkaConsumer
from fastapi import FastAPI

from hearth_read_models.query.app import make_app
from hearth_read_models.query.schedule_views import HOMES_SNAPSHOT
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.snapshots import KafkaSnapshotStore
from hearth_shared.domain.home_view import HomesView
from hearth_shared.schema.auth import create_token
from tests.integration.test_projector import caught_up, running_projector
from tests.support.home_history import AutomationHistory, write_home_facts
from tests.support.platform import SECRET
from tests.support.topics import pass_retention, produce, read_topic
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@asynccontextmanager
async def query_api(settings: ReadModelSettings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The query API in this process (its lifespan run: the home feed started, and stopped at the end,
    which saves its snapshot), and an admin client of it."""
    app = make_app(settings)
    headers = {"Authorization": f"Bearer {create_token(SECRET, admin=True)}"}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://query", headers=headers) as client:
            await eventually(lambda: _healthy(client), "the query API caught up", timeout_s=60)
            yield app, client


async def _healthy(client: httpx.AsyncClient) -> bool:
    return (await client.get("/healthz")).status_code == 200


async def _home_journal_ends(stack: StackSettings) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=stack.kafka_bootstrap_servers)
    await consumer.start()
    try:
        tps = await topic_partitions(consumer, stack.topics.home_journal)
        return {tp.partition: end for tp, end in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


async def _all_pages(client: httpx.AsyncClient, path: str, key: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    after = ""
    while True:
        response = await client.get(path, params={"limit": 10, "after": after})
        assert response.status_code == 200, response.text
        found += response.json()[key]
        after = response.json()["next_after"]
        if after is None:
            return found


def holds_no_history(app: FastAPI) -> bool:
    view: HomesView = app.state.homes
    return view.runs == {} and view.deliveries == {} and view.unsent == {}


async def test_runs_and_outcomes_are_served_from_postgresql_after_a_restart_from_the_snapshot(
    stack: StackSettings,
) -> None:
    settings = ReadModelSettings(stack=stack, schema_name=f"rm_{stack.topic_prefix}")
    home = f"h-{stack.topic_prefix}"
    history = AutomationHistory(home)
    facts = [*history.created(), *history.more(25)]
    await write_home_facts(stack, facts)
    await produce(stack.kafka_bootstrap_servers, stack.topics.home_journal, [(home.encode(), b"{not a fact")])
    automation_id = history.automation.automation_id

    # the previous release's snapshot: the home view with its latest runs and deliveries in it
    older = HomesView()
    for fact in facts:
        older.apply(fact)
    assert older.runs and older.deliveries and older.unsent == {}
    ends = await _home_journal_ends(stack)
    store = KafkaSnapshotStore(stack.kafka_bootstrap_servers, stack.topics.snapshots)
    await store.save(HOMES_SNAPSHOT, older.snapshot(), {stack.topics.home_journal: ends}, len(facts) + 1)
    await store.close()

    async with running_projector(stack, settings.schema_name) as projector:
        await caught_up(projector)
        assert projector.stats.dead_letters == 1
        await pass_retention(stack.kafka_bootstrap_servers, stack.topics.home_journal)  # the head is gone

        async with query_api(settings) as (app, query):
            report = (await query.get("/healthz")).json()["followers"][HOMES_SNAPSHOT]
            assert report["started_from"] == "snapshot", report
            assert holds_no_history(app)

            answer = (await query.get(f"/v1/automations/{automation_id}/runs")).json()
            assert answer["enabled"] is True and answer["suspended"] is None
            newest = [r.run_id for r in reversed(history.runs)]
            assert [r["run_id"] for r in answer["runs"]] == list(
                map(str, newest[:20])
            )  # 20 a page by default
            runs = await _all_pages(query, f"/v1/automations/{automation_id}/runs", "runs")
            assert [r["run_id"] for r in runs] == list(map(str, newest))  # every run is kept
            for run in runs:
                command, notify = run["actions"]
                assert command["status"] == "pending"  # no command row: none was sent in this test
                assert notify["status"] == history.outcomes[notify["action_id"]]
            deliveries = await _all_pages(query, f"/v1/homes/{home}/deliveries", "deliveries")
            assert [d["notification_id"] for d in deliveries] == [r["actions"][1]["action_id"] for r in runs]
            assert {d["outcome"] for d in deliveries} == {"notification.delivered", "notification.gave_up"}

            # a run whose notification has no outcome yet shows it as being sent
            await write_home_facts(stack, history.more(1, outcomes=False))

            async def newest_is_sending() -> bool:
                found = (await query.get(f"/v1/automations/{automation_id}/runs?limit=1")).json()["runs"]
                return (
                    bool(found)
                    and found[0]["run_id"] == str(history.runs[-1].run_id)
                    and (found[0]["actions"][1]["status"] == "sending")
                )

            await eventually(newest_is_sending, "the new run, its notification sending", timeout_s=30)
            assert holds_no_history(app)

        async with query_api(settings) as (app, query):  # restarted, from the snapshot it saved at its stop
            report = (await query.get("/healthz")).json()["followers"][HOMES_SNAPSHOT]
            assert report["started_from"] == "snapshot" and report["replayed"] == 0, report
            runs = await _all_pages(query, f"/v1/automations/{automation_id}/runs", "runs")
            assert len(runs) == 26 and runs[0]["actions"][1]["status"] == "sending"
            assert holds_no_history(app)

    def letter(value: bytes | None) -> dict[str, Any]:
        decoded: dict[str, Any] = msgspec.json.decode(value or b"{}")
        return decoded

    letters = await read_topic(stack, stack.topics.dead_letters, letter)
    assert [(d["source_topic"], d["reason"]) for d in letters] == [
        (stack.topics.home_journal, "invalid_home_fact")
    ]
