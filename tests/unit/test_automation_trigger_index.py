"""The engine's ``TriggerIndex`` must stay in step with the trigger rules: an automation it leaves out for
a fact is one that the rules (``fact_triggers``, ``state_triggers``, ``timer_change``) would never fire
on for that fact, whatever the report; it keeps the home's creation order; and a new automation of the
home is seen at the next fact."""

from __future__ import annotations

import random
import uuid

import pytest

from hearth_automations.service.trigger_index import TriggerIndex
from hearth_shared.domain.automation import (
    Automation,
    StateTest,
    TimeOfDay,
    Trigger,
    fact_triggers,
    state_triggers,
)
from hearth_shared.domain.automation_timers import timer_change
from hearth_shared.domain.home_view import HomesView
from hearth_shared.schema.events import StateReported, wire_name
from tests.support.engine_facts import HOME, automation, created

pytestmark = pytest.mark.unit

DEVICES = ("t1", "t2", "t3")
TYPES = (wire_name(StateReported), "anomaly.detected", "command.failed", "device.went_offline")


def random_trigger(rng: random.Random) -> Trigger:
    kind = rng.choice(["fact", "fact-any-device", "state", "state-for", "time"])
    device = rng.choice(DEVICES)
    if kind == "fact":
        return Trigger(fact=rng.choice(TYPES), device_id=device)
    if kind == "fact-any-device":
        return Trigger(fact=rng.choice(TYPES))
    if kind == "time":
        return Trigger(time=TimeOfDay(at="07:00"))
    for_s = 30.0 if kind == "state-for" else None
    return Trigger(state=StateTest(device_id=device, key="ambient_c", above=25, for_s=for_s))


def could_fire(a: Automation, device_id: str, fact_type: str) -> bool:
    """What the rules say, tried with a report that crosses any state test of ``a`` (the worst case)."""
    trigger = a.trigger
    if fact_triggers(trigger, (fact_type,), device_id):
        return True
    if fact_type != wire_name(StateReported):
        return False
    before, after = {"ambient_c": 20.0}, {"ambient_c": 30.0}
    changes = timer_change(trigger, device_id, before, after) is not None
    return state_triggers(trigger, device_id, before, after) or changes


@pytest.mark.parametrize("seed", range(5))
def test_the_index_leaves_out_only_automations_no_such_fact_can_trigger(seed: int) -> None:
    rng = random.Random(seed)
    view = HomesView()
    index = TriggerIndex(view)
    made: list[Automation] = []
    for _ in range(4):  # automations made between facts: the index sees each at the next fact
        for _ in range(rng.randint(1, 6)):
            a = automation(random_trigger(rng))
            made.append(a)
            view.apply(created(a))
        for device in DEVICES:
            for fact_type in TYPES:
                found = [s.definition for s in index.of(HOME).candidates(device, (fact_type,))]
                assert found == [a for a in made if could_fire(a, device, fact_type)]
        timed = [s.definition for s in index.of(HOME).timed]
        assert timed == [a for a in made if a.trigger.state is not None and a.trigger.state.for_s is not None]
    assert index.of("another-home").candidates("t1", (TYPES[0],)) == []


def test_a_fact_with_the_type_of_a_trigger_without_a_device_finds_it_on_every_device() -> None:
    view = HomesView()
    anomalies = automation(Trigger(fact="anomaly.detected"))
    view.apply(created(anomalies))
    index = TriggerIndex(view)
    assert all(
        [s.definition.automation_id for s in index.of(HOME).candidates(d, ("anomaly.detected",))]
        == [anomalies.automation_id]
        for d in (*DEVICES, str(uuid.uuid4()))
    )
