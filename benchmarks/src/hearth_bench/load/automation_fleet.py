"""The automations bench's fleet: homes of ``HOME_SIZE`` thermostats, one automation per device (or more:
automation ``k`` watches device ``k % devices``), and the readings that trigger them.

Each automation is a state trigger, ``ambient_c`` above ``THRESHOLD_C`` on its device, with a command
action on the same device (``set_hvac_mode`` cool), mode ``parallel`` (the bench's devices never
acknowledge, so a ``single`` automation would drop every trigger after its first). A device reads
``CALM_C`` and, every ``cross_every``-th reading (staggered by device), ``HOT_C``: each hot reading is an
edge, so one reading in ``cross_every`` triggers the device's automations and the next one re-arms them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

from hearth_shared.domain.automation import Action, Automation, CommandAction, StateTest, Trigger
from hearth_shared.domain.home_facts import AutomationCreated
from hearth_shared.schema.events import (
    DeviceRegistered,
    DeviceRegisteredPayload,
    Event,
    StateReported,
    StateReportedPayload,
)

HOME_SIZE = 10
COOL = {"mode": "cool"}
THRESHOLD_C, CALM_C, HOT_C = 28.0, 22.0, 29.0
MIN_RUN_GAP = timedelta(seconds=4)  # the loop breaker allows 20 runs a minute
NAMESPACE = uuid.UUID("0b7e4c52-5a39-4f0e-9d0e-3c1f1b2a7d64")


def device_id(i: int) -> str:
    return f"bench-thermo-{i:07d}"


def home_of(i: int) -> str:
    return f"bench-home-{i // HOME_SIZE:06d}"


def automations(count: int, devices: int, created_at: datetime) -> list[Automation]:
    return [
        cool_when_hot(
            uuid.uuid5(NAMESPACE, f"automation {k}"),
            home_of(k % devices),
            device_id(k % devices),
            THRESHOLD_C,
            created_at,
        )
        for k in range(count)
    ]


def cool_when_hot(
    automation_id: uuid.UUID, home_id: str, watched: str, above_c: float, created_at: datetime
) -> Automation:
    """Set ``watched`` to cool when its ``ambient_c`` goes above ``above_c`` (module docstring)."""
    cool = Action(command=CommandAction(device_id=watched, name="set_hvac_mode", params=COOL))
    return Automation(
        automation_id=automation_id,
        home_id=home_id,
        name=f"cool {watched} when hot",
        trigger=Trigger(state=StateTest(device_id=watched, key="ambient_c", above=above_c)),
        actions=(cool,),
        mode="parallel",
        created_at=created_at,
    )


def created_facts(found: list[Automation]) -> Iterator[AutomationCreated]:
    for a in found:
        yield AutomationCreated(
            fact_id=a.automation_id, home_id=a.home_id, occurred_at=a.created_at, recorded_at=a.created_at,
            payload=a,
        )  # fmt: skip


def reading(n: int, cross_every: int, device: int) -> float:
    """Device ``device``'s ``n``-th reading (from 1): the first calm, then hot every ``cross_every``-th,
    staggered by device so that the fleet's triggers are spread evenly over time, not all in one round."""
    return HOT_C if n > 1 and (n + device) % cross_every == 0 else CALM_C


def journal_facts(devices: int, facts: int, cross_every: int, start: datetime) -> Iterator[Event]:
    """What the actor would have written: each device registered, then ``facts`` readings round robin,
    spaced so that a device's hot readings are at least ``MIN_RUN_GAP`` apart (no automation runs more
    often than its loop breaker allows)."""
    step = max(timedelta(milliseconds=1), MIN_RUN_GAP / (devices * cross_every))
    for i in range(devices):
        registered = DeviceRegisteredPayload(device_type="thermostat", name=device_id(i))
        yield DeviceRegistered(
            event_id=uuid.uuid4(), device_id=device_id(i), home_id=home_of(i), version=1,
            occurred_at=start, recorded_at=start, payload=registered,
        )  # fmt: skip
    for n in range(facts):
        i, round_ = n % devices, n // devices + 1
        at = start + step * (n + 1)
        payload = StateReportedPayload(
            reported={"ambient_c": reading(round_, cross_every, i)}, device_seq=round_, device_time=at
        )
        yield StateReported(
            event_id=uuid.uuid4(), device_id=device_id(i), home_id=home_of(i), version=round_ + 1,
            occurred_at=at, recorded_at=at, payload=payload,
        )  # fmt: skip
