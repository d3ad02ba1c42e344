"""Facts and engines for the automation engine's unit tests: one home ``h``, journal facts made by hand,
and an engine (fake command path and notifier) that has read a home journal so far."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from hearth_automations.service.engine import Engine
from hearth_shared.domain.automation import Action, Automation, CommandAction, Mode, NotifyAction, Trigger
from hearth_shared.domain.home_facts import AutomationCreated, HomeFact
from hearth_shared.domain.home_view import HomesView
from hearth_shared.schema.events import CommandConverged, CommandRef, StateReported, StateReportedPayload
from tests.support.fakes import FakeClock, FakeEnginePath, FakeNotify

HOME = "h"
T0 = datetime(2026, 7, 1, 12, tzinfo=UTC)


def automation(
    trigger: Trigger, *, device_id: str = "t1", mode: Mode = "parallel", notify: bool = False
) -> Automation:
    """An automation of the home made at ``T0``: a command to ``device_id`` (and a notification)."""
    actions = [
        Action(command=CommandAction(device_id=device_id, name="set_hvac_mode", params={"mode": "cool"}))
    ]
    if notify:
        actions.append(Action(notify=NotifyAction(message="hot")))
    return Automation(
        automation_id=uuid.uuid4(), home_id=HOME, name="a", trigger=trigger, actions=tuple(actions),
        mode=mode, created_at=T0,
    )  # fmt: skip


def created(a: Automation) -> AutomationCreated:
    return AutomationCreated(
        fact_id=a.automation_id,
        home_id=a.home_id,
        occurred_at=a.created_at,
        recorded_at=a.created_at,
        payload=a,
    )


def report(at: datetime, device_id: str = "t1", **state: Any) -> StateReported:
    return StateReported(
        event_id=uuid.uuid4(), device_id=device_id, home_id=HOME, version=2, occurred_at=at, recorded_at=at,
        payload=StateReportedPayload(reported=state, device_seq=1, device_time=at),
    )  # fmt: skip


def converged(command_id: uuid.UUID, device_id: str, at: datetime) -> CommandConverged:
    return CommandConverged(
        event_id=uuid.uuid4(), device_id=device_id, home_id=HOME, version=3, occurred_at=at, recorded_at=at,
        correlation_id=command_id, payload=CommandRef(command_id=command_id),
    )  # fmt: skip


def engine_over(
    path: FakeEnginePath,
    facts: Sequence[HomeFact],
    notify: FakeNotify | None = None,
    clock: FakeClock | None = None,
) -> Engine:
    """A live engine that has read these home facts (a restarted one: the home journal so far)."""
    view = HomesView()
    for fact in facts:
        view.apply(fact)
    e = Engine(
        view, path, notify or FakeNotify(), owns=lambda h: True, clock=clock or FakeClock(T0),
        expires_in_s=60, defaults=False,
    )  # fmt: skip
    e.live = True
    return e
