"""Automation backtests through Spark, on real Kafka and Spark: the Spark job over the archive plus the
journal's tail counts exactly what the query API's in-process backtest counts over the same history (and
what was worked out by hand); and ``hearth automation backtest``, through the query API and through
Spark, counts what a live run of the automations service counted on the running platform."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from hearth.cli import app
from hearth_analytics.jobs.archive import start_archive
from hearth_analytics.jobs.automation_backtest import automations_from_home_journal, spark_backtest
from hearth_analytics.settings import AnalyticsSettings
from hearth_read_models.query.backtest_views import read_stretch
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain.automation import Action, Automation, NotifyAction, StateTest, Trigger
from hearth_shared.domain.automation_replay import BacktestResult, backtest, replayed
from tests.support.known_history import DAY1, DAY2, at, known_history
from tests.support.platform import SECRET, Platform
from tests.support.registration import register_device
from tests.support.topics import produce_facts_at_their_time
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]  # Spark jobs on 2 loaded cores

NOTIFY = (Action(notify=NotifyAction(message="x")),)


def _automation(home: str, trigger: Trigger, *conditions: StateTest) -> Automation:
    return Automation(
        automation_id=uuid.uuid4(), home_id=home, name="a", trigger=trigger, conditions=conditions,
        actions=NOTIFY, created_at=DAY2 + timedelta(days=30),  # a backtest also replays what came before
    )  # fmt: skip


ANOMALY = _automation("h1", Trigger(fact="anomaly.detected"))
HOT_WHILE_LOCKED = _automation(
    "h1",
    Trigger(state=StateTest(device_id="t1", key="ambient_c", above=25)),
    StateTest(device_id="l1", key="lock_state", equals="locked"),
)
FAILED_WHILE_OPEN = _automation(
    "h1", Trigger(fact="command.failed"), StateTest(device_id="l1", key="door", equals="open")
)
# t2 starts cooling at 10:00, the same instant x9 reports 21.0: the replay order puts x9 (version 1)
# before t2 (version 2), so the condition holds; the other order would not see x9's value yet.
COOLING_WHILE_MILD = _automation(
    "h2",
    Trigger(state=StateTest(device_id="t2", key="hvac_action", equals="cooling")),
    StateTest(device_id="x9", key="ambient_c", below=25),
)
AUTOMATIONS = [ANOMALY, HOT_WHILE_LOCKED, FAILED_WHILE_OPEN, COOLING_WHILE_MILD]


async def _in_process(
    stack: StackSettings, start: datetime, end: datetime
) -> dict[uuid.UUID, BacktestResult]:
    """What the query API computes, per automation (its reader and the domain's replay)."""
    results = {}
    for automation in AUTOMATIONS:
        found, complete = await read_stretch(
            stack.kafka_bootstrap_servers, stack.topics.journal, automation.home_id, start, end
        )
        assert complete
        results[automation.automation_id] = backtest(automation, map(replayed, found), start, end, "UTC")
    return results


async def test_spark_backtest_over_archive_and_tail_equals_the_in_process_one(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    facts = known_history().facts
    split = len(facts) * 2 // 3
    await produce_facts_at_their_time(stack, facts[:split])
    archived = AnalyticsSettings(
        stack=stack, checkpoint_dir=tmp_path / "ckpt", archive_url=str(tmp_path / "archive")
    )
    start_archive(spark, archived, once=True).awaitTermination()
    await produce_facts_at_their_time(stack, facts[split:])
    assert 0 < spark.read.parquet(archived.archive_location()).count() == split  # both parts are read

    whole = (DAY1, DAY2 + timedelta(days=1))
    by_spark = spark_backtest(spark, archived, AUTOMATIONS, *whole)
    assert by_spark == await _in_process(stack, *whole)
    counted = {
        a.automation_id: (r.facts, r.triggered, r.fired, r.fired_at) for a, r in zip(
            AUTOMATIONS, (by_spark[a.automation_id] for a in AUTOMATIONS), strict=True
        )
    }  # fmt: skip
    h1 = sum(f.home_id == "h1" for f in facts)
    h2 = sum(f.home_id == "h2" for f in facts)
    assert counted == {
        ANOMALY.automation_id: (h1, 2, 2, [at(DAY2, 12, 0, 1), at(DAY2, 12, 45, 1)]),
        HOT_WHILE_LOCKED.automation_id: (h1, 1, 1, [at(DAY2, 12)]),
        FAILED_WHILE_OPEN.automation_id: (h1, 1, 0, []),
        COOLING_WHILE_MILD.automation_id: (h2, 1, 1, [at(DAY1, 10)]),
    }
    assert by_spark[ANOMALY.automation_id].fired_by_hour == {at(DAY2, 12): 2}

    # a part of the history: bounds at odd instants, facts on both sides of them
    part = (at(DAY2, 12, 0, 2), at(DAY2, 12, 50))
    by_spark = spark_backtest(spark, archived, AUTOMATIONS, *part)
    assert by_spark == await _in_process(stack, *part)
    assert by_spark[ANOMALY.automation_id].fired_at == [at(DAY2, 12, 45, 1)]
    assert by_spark[COOLING_WHILE_MILD.automation_id] == BacktestResult()  # h2 has nothing in it


async def test_the_cli_backtest_counts_what_the_live_run_counted(
    platform: Platform,
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    home: str,
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = datetime.now(UTC) - timedelta(seconds=5)
    watched = await register_device(api, home, "thermostat", name="living room")
    response = await api.post(
        "/v1/automations",
        json={
            "home_id": home,
            "name": "count the living room's changes",
            "trigger": {"fact": "thermostat.target_set", "device_id": watched},
            "actions": [{"notify": {"message": "the living room changed"}}],
            "mode": "parallel",
        },
    )
    assert response.status_code == 201, response.text
    automation_id = response.json()["automation_id"]

    async def listed() -> bool:
        found = (await query.get("/v1/automations")).json()["automations"]
        return any(a["automation_id"] == automation_id for a in found)

    await eventually(listed, "the automation in the query API", timeout_s=15)
    for target in (20, 21, 22):
        sent = await api.post(
            f"/v1/devices/{watched}/commands",
            json={"name": "set_target_temperature", "params": {"target_c": target}},
        )
        assert sent.status_code == 202, sent.text

    async def live_runs() -> int:
        response = await query.get(f"/v1/automations/{automation_id}/runs")
        return sum(run["fired"] for run in response.json()["runs"])

    async def three_runs() -> bool:
        return await live_runs() == 3

    await eventually(three_runs, "three live runs", timeout_s=30)
    end = datetime.now(UTC) + timedelta(seconds=5)

    monkeypatch.setenv("HEARTH_TOKEN_SECRET", SECRET)
    monkeypatch.setenv("HEARTH_KAFKA_BOOTSTRAP_SERVERS", platform.settings.kafka_bootstrap_servers)
    monkeypatch.setenv("HEARTH_TOPIC_PREFIX", platform.settings.topic_prefix)
    monkeypatch.setenv("HEARTH_ANALYTICS_ARCHIVE_URL", str(tmp_path / "no-archive"))  # the journal alone
    argv = ["automation", "backtest", automation_id, "--from", started.isoformat(), "--to", end.isoformat()]
    answers = {}
    for path in ("--no-spark", "--spark"):
        ran = CliRunner().invoke(app, [*argv, path, "--json", "--api", platform.query_api])
        assert ran.exit_code == 0, ran.output
        answers[path] = json.loads(ran.stdout)
    assert answers["--no-spark"]["fired"] == answers["--spark"]["fired"] == await live_runs() == 3
    assert answers["--no-spark"] == answers["--spark"]
    assert await live_runs() == 3  # the backtests acted on nothing

    # the definition the Spark path used is the home journal's
    settings = AnalyticsSettings(stack=platform.settings)
    assert automations_from_home_journal(settings)[uuid.UUID(automation_id)].home_id == home
