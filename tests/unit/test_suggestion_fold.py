"""Suggested programs folded from the home journal (``HomesView``): a suggestion changes no schedule; an
accept of the device's open one sets the program exactly as a ``schedule.set`` of it would; a decision on
one that is not open there (another device's or home's, decided, replaced by a newer one) changes
nothing; folding twice changes nothing; a snapshot keeps suggestions and rooms' responses."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from hearth_shared.domain.home_facts import (
    DecisionPayload,
    ProgramPayload,
    RoomResponseFitted,
    ScheduleSet,
    ScheduleSuggested,
    ScheduleSuggestionAccepted,
    ScheduleSuggestionRejected,
    SuggestionPayload,
)
from hearth_shared.domain.home_view import HomesView
from hearth_shared.domain.program_learning import WEEKDAYS, SuggestionEvidence
from hearth_shared.domain.room_response import ResponseFit, RoomResponse
from hearth_shared.domain.schedule import ProgramEntry, ScheduledCommand

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _program(target: float) -> tuple[ProgramEntry, ...]:
    command = ScheduledCommand(name="set_target_temperature", params={"target_c": target})
    return (ProgramEntry(days=WEEKDAYS, at="06:30", command=command),)


def suggested(target: float, at: datetime = T0, device: str = "t1", home: str = "h") -> ScheduleSuggested:
    evidence = SuggestionEvidence(
        weeks=4, changes=20, regularity=0.9, timezone="UTC", first_change=T0, last_change=T0
    )
    return ScheduleSuggested(
        fact_id=uuid.uuid4(), home_id=home, device_id=device, occurred_at=at, recorded_at=at,
        payload=SuggestionPayload(device_type="thermostat", program=_program(target), evidence=evidence),
    )  # fmt: skip


def decision(
    kind: type[ScheduleSuggestionAccepted] | type[ScheduleSuggestionRejected],
    suggestion: ScheduleSuggested,
    at: datetime,
    *,
    device: str = "t1",
    home: str = "h",
) -> ScheduleSuggestionAccepted | ScheduleSuggestionRejected:
    return kind(
        fact_id=uuid.uuid4(), home_id=home, device_id=device, occurred_at=at, recorded_at=at,
        payload=DecisionPayload(suggestion_id=suggestion.fact_id),
    )  # fmt: skip


def test_accepting_the_open_suggestion_sets_the_program_as_a_schedule_set_would() -> None:
    view, by_put = HomesView(), HomesView()
    s = suggested(21.0)
    view.apply(s)
    assert view.schedules == {}  # a suggestion changes no schedule
    assert view.open_suggestion("t1") is not None
    accepted_at = T0 + timedelta(hours=1)
    changed = view.apply(decision(ScheduleSuggestionAccepted, s, accepted_at))
    put = ScheduleSet(
        fact_id=uuid.uuid4(), home_id="h", device_id="t1", occurred_at=accepted_at, recorded_at=accepted_at,
        payload=ProgramPayload(program=_program(21.0), device_type="thermostat"),
    )  # fmt: skip
    assert changed is not None and changed == by_put.apply(put)
    assert view.schedules == by_put.schedules
    kept = view.suggestions["t1"][s.fact_id]
    assert (kept.status, kept.decided_at) == ("accepted", accepted_at)
    assert view.open_suggestion("t1") is None


def test_accepting_a_suggestion_keeps_the_households_preheat_cap() -> None:
    view = HomesView()
    capped = ScheduleSet(
        fact_id=uuid.uuid4(), home_id="h", device_id="t1", occurred_at=T0, recorded_at=T0,
        payload=ProgramPayload(program=_program(20.0), device_type="thermostat", preheat_max_s=5 * 3600),
    )  # fmt: skip
    view.apply(capped)
    s = suggested(21.0, T0 + timedelta(hours=1))
    view.apply(s)
    changed = view.apply(decision(ScheduleSuggestionAccepted, s, T0 + timedelta(hours=2)))
    assert changed is not None and changed.program == _program(21.0)
    assert changed.preheat_max_s == 5 * 3600  # the program is the suggestion's; the cap stays the household's


def test_a_decision_on_a_suggestion_not_open_there_changes_nothing() -> None:
    view = HomesView()
    old, new = suggested(20.0), suggested(22.0, T0 + timedelta(days=7))
    view.apply(old)
    view.apply(new)  # the newest is the open one; the older is dropped
    assert list(view.suggestions["t1"]) == [new.fact_id]
    later = T0 + timedelta(days=8)
    assert view.apply(decision(ScheduleSuggestionAccepted, old, later)) is None
    assert view.apply(decision(ScheduleSuggestionAccepted, new, later, device="t2")) is None
    assert view.apply(decision(ScheduleSuggestionAccepted, new, later, home="other")) is None
    assert view.schedules == {}
    view.apply(decision(ScheduleSuggestionRejected, new, later))
    assert view.suggestions["t1"][new.fact_id].status == "rejected"
    assert view.apply(decision(ScheduleSuggestionAccepted, new, later)) is None  # decided already
    assert view.schedules == {}


def test_folding_twice_changes_nothing_and_a_snapshot_keeps_suggestions_and_responses() -> None:
    view = HomesView()
    s = suggested(21.0)
    view.apply(s)
    view.apply(decision(ScheduleSuggestionRejected, s, T0))
    view.apply(s)  # a replay of the suggestion after its decision
    assert view.suggestions["t1"][s.fact_id].status == "rejected"
    fit = ResponseFit(base_c_per_h=4.0, per_degree_per_h=-0.1, samples=50, rmse_c_per_h=0.2)
    older, newer = (
        RoomResponseFitted(
            fact_id=uuid.uuid4(),
            home_id="h",
            device_id="t1",
            occurred_at=T0,
            recorded_at=T0,
            payload=RoomResponse(heating=fit, fitted_from=T0, fitted_to=T0 + timedelta(days=d)),
        )
        for d in (1, 2)
    )
    view.apply(newer)
    view.apply(older)  # fitted on older readings: the newer stays
    assert view.responses["t1"] == newer
    restored = HomesView()
    restored.restore(view.snapshot())
    assert restored.responses == view.responses
    assert restored.suggestions["t1"][s.fact_id].status == "rejected"
    assert restored.suggestions["t1"][s.fact_id].suggestion == s
