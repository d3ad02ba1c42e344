"""The automation engine with a fake command path and notifier: a trigger fact acts once; a restart that
replays the journal acts on nothing already recorded, and a crash between the command and the run fact
sends the very same command id again (which the device actor records once)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from hearth_automations.service.engine import Engine
from hearth_shared.domain.automation import Action, Automation, CommandAction, NotifyAction, Trigger
from hearth_shared.domain.home_facts import AutomationCreated, HomeFact
from hearth_shared.domain.home_view import HomesView
from hearth_shared.schema.events import (
    AnomalyDetected,
    AnomalyDetectedPayload,
    StateReported,
    StateReportedPayload,
)
from tests.support.fakes import FakeClock, FakeEnginePath, FakeNotify

pytestmark = pytest.mark.unit

T0 = datetime(2026, 7, 1, tzinfo=UTC)


AUTOMATION = Automation(
    automation_id=uuid.uuid4(), home_id="h", name="safe mode", trigger=Trigger(fact="anomaly.detected"),
    actions=(
        Action(command=CommandAction(device_id="t1", name="set_hvac_mode", params={"mode": "off"})),
        Action(notify=NotifyAction(message="anomalous")),
    ),
    created_at=T0,
)  # fmt: skip
CREATED = AutomationCreated(
    fact_id=AUTOMATION.automation_id, home_id="h", occurred_at=T0, recorded_at=T0, payload=AUTOMATION
)


def anomaly(at: datetime) -> AnomalyDetected:
    return AnomalyDetected(
        event_id=uuid.uuid4(), device_id="t1", home_id="h", version=3, occurred_at=at, recorded_at=at,
        payload=AnomalyDetectedPayload(
            metric="ambient_c", value=40.0, score=9.0, threshold=4.0, model_version=1, device_time=at
        ),
    )  # fmt: skip


def reported(device_id: str, at: datetime, **state: Any) -> StateReported:
    return StateReported(
        event_id=uuid.uuid4(), device_id=device_id, home_id="h", version=2, occurred_at=at, recorded_at=at,
        payload=StateReportedPayload(reported=state, device_seq=1, device_time=at),
    )  # fmt: skip


def engine(path: FakeEnginePath, notify: FakeNotify, facts: list[HomeFact]) -> Engine:
    view = HomesView()
    for fact in facts:
        view.apply(fact)
    return Engine(view, path, notify, owns=lambda h: True, clock=FakeClock(T0), expires_in_s=60)


async def test_a_trigger_acts_once_and_a_replay_after_a_restart_acts_on_nothing_recorded() -> None:
    path, notify = FakeEnginePath(), FakeNotify()
    first = engine(path, notify, [CREATED])
    fact = anomaly(T0 + timedelta(seconds=5))
    await first.on_fact(fact)
    await first.on_fact(fact)  # redelivered
    assert [r.name for r in path.requests] == ["set_hvac_mode"] and len(notify.sent) == 1
    restarted_path, restarted_notify = FakeEnginePath(), FakeNotify()
    restarted = engine(restarted_path, restarted_notify, [CREATED, *path.facts])
    await restarted.on_fact(anomaly(T0 - timedelta(seconds=5)))  # older than the automation: never
    await restarted.on_fact(fact)
    assert restarted_path.requests == [] and restarted_notify.sent == []


async def test_killed_between_command_and_run_fact_the_replay_sends_the_same_command_id() -> None:
    path, notify = FakeEnginePath(), FakeNotify()
    fact = anomaly(T0 + timedelta(seconds=5))
    await engine(path, notify, [CREATED]).on_fact(fact)
    lost_run = FakeEnginePath()  # the run fact never reached the home journal
    await engine(lost_run, FakeNotify(), [CREATED]).on_fact(fact)
    assert [r.command_id for r in lost_run.requests] == [r.command_id for r in path.requests]


async def test_a_notification_without_its_delivery_fact_is_sent_again_after_a_restart() -> None:
    path, notify = FakeEnginePath(), FakeNotify()
    await engine(path, notify, [CREATED]).on_fact(anomaly(T0 + timedelta(seconds=5)))
    again = FakeNotify()
    engine(FakeEnginePath(), again, [CREATED, *path.facts]).undelivered()
    assert again.sent == notify.sent
    assert msgspec.json.encode(path.facts[0])  # the run fact encodes for the journal


async def test_a_home_gets_its_corrective_automations_once_and_an_anomaly_sets_that_device_off() -> None:
    from hearth_automations.service.defaults import default_id
    from hearth_shared.schema.events import DeviceRegistered, DeviceRegisteredPayload

    path, notify = FakeEnginePath(), FakeNotify()
    e = engine(path, notify, [])
    e.live = True
    registered = DeviceRegistered(
        event_id=uuid.uuid4(), device_id="t9", home_id="h", version=1, occurred_at=T0, recorded_at=T0,
        payload=DeviceRegisteredPayload(device_type="thermostat", name="t9"),
    )  # fmt: skip
    await e.on_fact(registered)
    await e.on_fact(registered)
    created = [f for f in path.facts if isinstance(f, AutomationCreated)]
    assert len(created) == 3
    await e.on_fact(reported("t9", T0 + timedelta(milliseconds=500), hvac_mode="heat"))
    await e.on_fact(msgspec.structs.replace(anomaly(T0 + timedelta(seconds=1)), device_id="t9"))
    assert [(r.device_id, r.name, r.params) for r in path.requests] == [
        ("t9", "set_hvac_mode", {"mode": "off"})
    ]
    assert len(notify.sent) == 1
    # once the device is off, its further anomalies neither act nor notify again: one alert, one notification
    await e.on_fact(reported("t9", T0 + timedelta(seconds=1.5), hvac_mode="off"))
    await e.on_fact(msgspec.structs.replace(anomaly(T0 + timedelta(seconds=1.6)), device_id="t9"))
    assert len(path.requests) == 1 and len(notify.sent) == 1
    # switched off, it does nothing
    from hearth_shared.domain.home_facts import AutomationSwitched, SwitchPayload

    e.view.apply(
        AutomationSwitched(
            fact_id=uuid.uuid4(),
            home_id="h",
            occurred_at=T0,
            recorded_at=T0,
            payload=SwitchPayload(automation_id=default_id("h", "anomalous-thermostat"), enabled=False),
        )
    )
    await e.on_fact(reported("t9", T0 + timedelta(seconds=1.8), hvac_mode="heat"))
    await e.on_fact(msgspec.structs.replace(anomaly(T0 + timedelta(seconds=2)), device_id="t9"))
    assert len(path.requests) == 1


async def test_defaults_made_while_replaying_an_old_journal_do_not_act_on_its_past() -> None:
    from hearth_shared.schema.events import DeviceRegistered, DeviceRegisteredPayload

    path, notify = FakeEnginePath(), FakeNotify()
    e = Engine(
        HomesView(),
        path,
        notify,
        owns=lambda h: True,
        clock=FakeClock(T0 + timedelta(days=1)),
        expires_in_s=60,
    )
    registered = DeviceRegistered(
        event_id=uuid.uuid4(), device_id="t9", home_id="h", version=1, occurred_at=T0, recorded_at=T0,
        payload=DeviceRegisteredPayload(device_type="thermostat", name="t9"),
    )  # fmt: skip
    await e.on_fact(registered)
    await e.on_fact(msgspec.structs.replace(anomaly(T0 + timedelta(hours=1)), device_id="t9"))
    assert path.requests == [] and notify.sent == []


def test_a_switch_fact_from_another_home_changes_nothing() -> None:
    from hearth_shared.domain.home_facts import AutomationSwitched, SwitchPayload

    view = HomesView()
    view.apply(CREATED)
    view.apply(
        AutomationSwitched(
            fact_id=uuid.uuid4(),
            home_id="someone-else",
            occurred_at=T0,
            recorded_at=T0,
            payload=SwitchPayload(automation_id=AUTOMATION.automation_id, enabled=False),
        )
    )
    assert view.automations[AUTOMATION.automation_id].active
