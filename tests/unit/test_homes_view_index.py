"""``HomesView.automations_of``: the index the automations engine looks a fact's home up in holds exactly
the home's automations, in creation order, as the same states (a switch or a suspension shows in it)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from hearth_shared.domain.automation import Action, Automation, NotifyAction, Trigger
from hearth_shared.domain.home_facts import AutomationCreated, AutomationSwitched, SwitchPayload
from hearth_shared.domain.home_view import HomesView

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 24, tzinfo=UTC)


def _created(home: str, n: int) -> AutomationCreated:
    automation = Automation(
        automation_id=uuid.uuid5(uuid.NAMESPACE_URL, f"{home}/{n}"), home_id=home, name=f"{n}",
        trigger=Trigger(fact="anomaly.detected"), actions=(Action(notify=NotifyAction(message="x")),),
        created_at=T0,
    )  # fmt: skip
    return AutomationCreated(
        fact_id=automation.automation_id, home_id=home, occurred_at=T0, recorded_at=T0, payload=automation
    )


def test_a_homes_automations_are_indexed_in_creation_order_as_the_same_states() -> None:
    view = HomesView()
    facts = [_created(home, n) for n in range(3) for home in ("h1", "h2")]
    for fact in [*facts, facts[0]]:  # a created fact folded twice changes nothing
        view.apply(fact)
    for home in ("h1", "h2", "h3"):
        expected = [s for s in view.automations.values() if s.definition.home_id == home]
        assert view.automations_of(home) == expected
        assert all(a is b for a, b in zip(view.automations_of(home), expected, strict=True))
    assert [s.definition.name for s in view.automations_of("h1")] == ["0", "1", "2"]
    first = facts[0].payload.automation_id
    view.apply(
        AutomationSwitched(
            fact_id=uuid.uuid4(), home_id="h1", occurred_at=T0, recorded_at=T0,
            payload=SwitchPayload(automation_id=first, enabled=False),
        )
    )  # fmt: skip
    assert not view.automations_of("h1")[0].active
