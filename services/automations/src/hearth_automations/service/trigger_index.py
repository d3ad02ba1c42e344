"""Which of a home's automations a journal fact can trigger, looked up by (device, fact type) instead of
testing every automation of the home on every fact (with 10 automations a home, that test was most of
the engine's time per fact once its sends were batched).

A fact can trigger an automation only if its fact trigger names the fact's type (and the fact's device,
or no device), or its state trigger (with or without ``for_s``) watches the fact's device and the fact
is a state report; a time trigger no fact triggers. ``candidates`` keeps the home's creation order, so
the engine decides (and collects effects) in the same order as it did testing them all. ``timed`` is the
home's ``for_s`` automations: the engine drops an inactive one's pending timer on every fact of the
home, as it did. Built on first use per home, rebuilt once the home has another automation (automations
are created, switched and suspended, never removed: the count is the home's revision; ``active`` is read
at each fact, not cached). Pure: no I/O, no clock.
"""

from __future__ import annotations

from hearth_shared.domain.automation import FactNames
from hearth_shared.domain.home_view import AutomationState, HomesView
from hearth_shared.schema.events import StateReported, wire_name

_REPORTED = wire_name(StateReported)


def can_trigger(state: AutomationState, device_id: str, names: FactNames) -> bool:
    """Whether a fact of these ``names`` (``fact_names``) from ``device_id`` can trigger the automation."""
    trigger = state.definition.trigger
    if trigger.fact in names and trigger.device_id in (None, device_id):
        return True
    return trigger.state is not None and trigger.state.device_id == device_id and _REPORTED in names


def waits(state: AutomationState) -> bool:
    """A state trigger held ``for_s``: it has a timer the engine keeps."""
    test = state.definition.trigger.state
    return test is not None and test.for_s is not None


class HomeTriggers:
    """One home's automations, by what can trigger them."""

    def __init__(self, automations: list[AutomationState]) -> None:
        self.automations = automations
        self.timed = [s for s in automations if waits(s)]
        self.by_fact: dict[tuple[str, FactNames], list[AutomationState]] = {}

    def candidates(self, device_id: str, names: FactNames) -> list[AutomationState]:
        key = (device_id, names)
        found = self.by_fact.get(key)
        if found is None:
            found = self.by_fact[key] = [s for s in self.automations if can_trigger(s, device_id, names)]
        return found


class TriggerIndex:
    def __init__(self, view: HomesView) -> None:
        self.view = view
        self.homes: dict[str, HomeTriggers] = {}

    def of(self, home_id: str) -> HomeTriggers:
        known = self.homes.get(home_id)
        if known is None or len(known.automations) != self.view.automation_count(home_id):
            known = self.homes[home_id] = HomeTriggers(self.view.automations_of(home_id))
        return known
