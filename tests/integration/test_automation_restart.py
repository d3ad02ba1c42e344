"""The automations service restarting from its snapshot on the real broker, as its own process on the
test's own topics (facts written to the journals as the device actor and the command API would): an
automation and a schedule act; the service is stopped (a clean stop saves its snapshot), a retention
window passes over the whole journal and home journal, and the service starts again: from the snapshot,
reading nothing of either journal, it still knows the automation and the schedule, a new trigger fact
fires the automation once and the schedule's next transition fires once; nothing from before the stop
is sent again.

How long it takes is how far ahead the next transition is set: just past the first process's stop
(about 20 s; it may pass before the restart, and then fires once at its first tick), not a minute."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hearth_devstack.launch.server_startup import start_healthy
from hearth_devstack.launch.service_processes import follower_reports_dir
from hearth_devstack.local import Services
from hearth_devstack.supervision.process import ManagedProcess
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.snapshots import KafkaSnapshotStore
from hearth_shared.domain.automation import Action, Automation, CommandAction, Trigger, action_id, run_id
from hearth_shared.domain.home_facts import (
    AutomationCreated,
    AutomationRan,
    HomeFact,
    ProgramPayload,
    ScheduleSet,
    ScheduleTransitionFired,
    decode_home_fact,
    encode_home_fact,
)
from hearth_shared.domain.schedule import DAYS, ProgramEntry, ScheduledCommand, transition_command_id
from hearth_shared.schema.events import (
    AnomalyDetected,
    AnomalyDetectedPayload,
    SubmitCommand,
    decode_inbound,
    utcnow,
)
from tests.support.topics import pass_retention, produce, produce_facts, read_topic
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HOME = "snapshot-home"


def automations_part(settings: StackSettings, base: Path) -> ManagedProcess:
    services = Services(settings, logs=base / "logs", data=base / "data")
    (base / "data").mkdir(parents=True, exist_ok=True)
    part, timeout_s = services.part("automations")
    return start_healthy(part, timeout_s * 2)


async def append_home(settings: StackSettings, *facts: HomeFact) -> None:
    records = ((f.home_id.encode(), encode_home_fact(f)) for f in facts)
    await produce(settings.kafka_bootstrap_servers, settings.topics.home_journal, records)


def anomaly(device_id: str) -> AnomalyDetected:
    now = utcnow()
    return AnomalyDetected(
        event_id=uuid.uuid4(), device_id=device_id, home_id=HOME, version=7, occurred_at=now, recorded_at=now,
        payload=AnomalyDetectedPayload(
            metric="ambient_c", value=40.0, score=9.0, threshold=4.0, model_version=1, device_time=now
        ),
    )  # fmt: skip


def program_at(*instants: datetime) -> tuple[ProgramEntry, ...]:
    """One entry a day at each instant's time of day (UTC, the home's zone by default)."""
    return tuple(
        ProgramEntry(
            days=DAYS,
            at=at.strftime("%H:%M:%S"),
            command=ScheduledCommand(name="set_target_temperature", params={"target_c": 18.0 + n}),
        )
        for n, at in enumerate(instants)
    )


async def home_facts(settings: StackSettings) -> list[HomeFact]:
    return await read_topic(settings, settings.topics.home_journal, decode_home_fact)


async def has(settings: StackSettings, found: Any) -> bool:
    return any(found(f) for f in await home_facts(settings))


async def test_restarted_from_its_snapshot_after_retention_it_reads_only_the_tail_and_acts_once(
    broker_only: StackSettings, tmp_path: Path
) -> None:
    settings = broker_only
    started = time.monotonic()
    first = automations_part(settings, tmp_path / "first")
    start_s = time.monotonic() - started
    try:
        now = utcnow()
        automation = Automation(
            automation_id=uuid.uuid4(), home_id=HOME, name="safe mode when anomalous",
            trigger=Trigger(fact="anomaly.detected", device_id="watched"),
            actions=(Action(command=CommandAction(device_id="follower", name="set_hvac_mode",
                                                  params={"mode": "off"})),),
            mode="parallel", created_at=now,
        )  # fmt: skip
        # The second transition only has to come after the first process has stopped: if the restart is
        # slower, it is missed while nothing runs and fires at the restarted one's first tick, once. A
        # stop costs about what a start did, so the margin grows with that: 20 s on a quiet machine.
        soon = (now + timedelta(seconds=3)).replace(microsecond=0)
        later = (now + timedelta(seconds=5 + max(15.0, 4 * start_s))).replace(microsecond=0)
        await append_home(
            settings,
            AutomationCreated(fact_id=automation.automation_id, home_id=HOME, occurred_at=now,
                              recorded_at=now, payload=automation),
            ScheduleSet(fact_id=uuid.uuid4(), home_id=HOME, device_id="scheduled", occurred_at=now,
                        recorded_at=now, payload=ProgramPayload(program=program_at(soon, later),
                                                                device_type="thermostat")),
        )  # fmt: skip

        def ran(run: uuid.UUID) -> Any:
            return lambda f: isinstance(f, AutomationRan) and f.payload.run_id == run

        def fired(instant: datetime) -> Any:
            return lambda f: isinstance(f, ScheduleTransitionFired) and f.payload.instant == instant

        # The engine is live and has fired the first transition before the trigger is sent (the
        # trigger's own order after its automation is the engine's: TopicFollower(after=...)).
        await eventually(lambda: has(settings, fired(soon)), "the first transition", timeout_s=40)
        before = anomaly("watched")
        await produce_facts(settings, [before])
        before_run = run_id(automation.automation_id, before.event_id)
        await eventually(lambda: has(settings, ran(before_run)), "the run before the stop", timeout_s=30)
    finally:
        first.stop()  # SIGTERM: a clean stop saves the snapshot
    assert utcnow() < later, "the machine was too slow: the second transition came before the stop"
    store = KafkaSnapshotStore(settings.kafka_bootstrap_servers, settings.topics.snapshots)
    try:
        assert await store.load("automations-0-of-1") is not None
    finally:
        await store.close()
    for topic in (settings.topics.journal, settings.topics.home_journal):
        await pass_retention(settings.kafka_bootstrap_servers, topic)
    assert await home_facts(settings) == []  # nothing of the home journal is left to fold

    second = automations_part(settings, tmp_path / "second")
    try:
        reports = follower_reports_dir(tmp_path / "second" / "data", "automations")
        journal_report = json.loads((reports / "journal.json").read_text())
        homes_report = json.loads((reports / "home-journal.json").read_text())
        assert journal_report["started_from"] == "snapshot", journal_report
        assert homes_report["started_from"] == "positions kept in another snapshot", homes_report
        assert [journal_report[k] for k in ("replayed", "gap")] == [0, 0], journal_report
        assert [homes_report[k] for k in ("replayed", "gap")] == [0, 0], homes_report

        after = anomaly("watched")
        await produce_facts(settings, [after])
        after_run = run_id(automation.automation_id, after.event_id)
        await eventually(lambda: has(settings, ran(after_run)), "the run after the restart", timeout_s=30)
        await eventually(lambda: has(settings, fired(later)), "the next transition", timeout_s=90)
    finally:
        second.stop()

    # Each once: the commands of both runs and both transitions, none sent again by the restart; the
    # home journal's facts since the retention window passed: the new run and the next transition only.
    inbox = await read_topic(settings, settings.topics.command_lane, decode_inbound)
    sent = Counter(r.command_id for r in inbox if isinstance(r, SubmitCommand))
    assert sent == {
        action_id(before_run, 0): 1,
        action_id(after_run, 0): 1,
        transition_command_id("scheduled", soon): 1,
        transition_command_id("scheduled", later): 1,
    }, sent
    since = await home_facts(settings)
    assert [f.payload.run_id for f in since if isinstance(f, AutomationRan)] == [after_run]
    assert [f.payload.instant for f in since if isinstance(f, ScheduleTransitionFired)] == [later]
