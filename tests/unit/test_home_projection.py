"""The home journal's projection (``projection.home_rules``): a run fact is one ``automation_runs`` row
(the run as on the wire, its position), a delivery or give-up one ``notification_outcomes`` row, any other
home fact nothing; a record that is not a home fact, or one PostgreSQL could not store, is refused with a
reason (a dead letter); within a batch a run recorded twice keeps its first row, an outcome its latest."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from hearth_read_models.projection.home_rules import HomeRows, OutcomeRow, RunRow, home_row
from hearth_shared.domain.home_facts import (
    ActionRecord,
    AutomationRan,
    HomeFact,
    HomeTimezoneSet,
    NotificationDelivered,
    NotificationGaveUp,
    NotificationPayload,
    RunPayload,
    TimezonePayload,
    TriggerRecord,
    encode_home_fact,
)
from hearth_shared.schema.events import MalformedRecord

pytestmark = pytest.mark.unit

HOME = "home-1"
T0 = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)


def fact(kind: type[HomeFact], payload: object, at: datetime = T0) -> HomeFact:
    return kind(  # type: ignore[call-arg]
        fact_id=uuid.uuid4(), home_id=HOME, occurred_at=at, recorded_at=at, payload=payload
    )


def a_run(detail: str = "") -> RunPayload:
    trigger = TriggerRecord(fact_id=uuid.uuid4(), type="device.went_offline", device_id="t1", occurred_at=T0)
    return RunPayload(
        automation_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        trigger=trigger,
        conditions=(True,),
        fired=True,
        admission="start",
        actions=(
            ActionRecord(index=0, kind="command", action_id=uuid.uuid4(), device_id="t2", detail=detail),
            ActionRecord(index=1, kind="notify", action_id=uuid.uuid4()),
        ),
    )


def an_outcome(notification_id: uuid.UUID, attempts: int = 1) -> NotificationPayload:
    return NotificationPayload(
        notification_id=notification_id, automation_id=None, attempts=attempts, status=200
    )


def test_a_run_is_a_row_with_the_run_as_on_the_wire_and_its_position() -> None:
    run = a_run()
    row = home_row(encode_home_fact(fact(AutomationRan, run)), 3, 41)
    assert isinstance(row, RunRow)
    assert (row.run_id, row.automation_id, row.home_id, row.ran_at) == (
        run.run_id,
        run.automation_id,
        HOME,
        T0,
    )
    assert (row.journal_partition, row.journal_offset) == (3, 41)
    assert msgspec.json.decode(row.run, type=RunPayload) == run


def test_a_delivery_and_a_give_up_are_outcome_rows() -> None:
    notification_id = uuid.uuid4()
    for kind, outcome in (
        (NotificationDelivered, "notification.delivered"),
        (NotificationGaveUp, "notification.gave_up"),
    ):
        payload = an_outcome(notification_id, attempts=5)
        row = home_row(encode_home_fact(fact(kind, payload, T0 + timedelta(seconds=9))), 0, 7)
        assert isinstance(row, OutcomeRow)
        assert (row.notification_id, row.home_id, row.outcome, row.at) == (
            notification_id, HOME, outcome, T0 + timedelta(seconds=9),
        )  # fmt: skip
        assert msgspec.json.decode(row.payload, type=NotificationPayload) == payload


def test_other_home_facts_project_nothing() -> None:
    zone = fact(HomeTimezoneSet, TimezonePayload(timezone="Europe/Berlin"))
    assert home_row(encode_home_fact(zone), 0, 0) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "no_value"),
        (b"{not json", "invalid_home_fact"),
        (b'{"type": "device.registered"}', "invalid_home_fact"),
        pytest.param(  # (its own id: the fact's random ids in it would differ from worker to worker)
            encode_home_fact(fact(AutomationRan, a_run(detail="a\x00b"))),
            "unstorable_home_fact",
            id="nul-in-a-run",
        ),
    ],
)
def test_a_record_that_is_not_a_storable_home_fact_is_refused_with_its_reason(
    value: bytes | None, reason: str
) -> None:
    with pytest.raises(MalformedRecord) as refused:
        home_row(value, 0, 0)
    assert refused.value.reason == reason


def test_in_a_batch_a_run_keeps_its_first_row_and_an_outcome_its_latest() -> None:
    run = a_run()
    notification_id = uuid.uuid4()
    rows = HomeRows()
    for offset, record in enumerate(
        [
            fact(AutomationRan, run),
            fact(NotificationGaveUp, an_outcome(notification_id, attempts=5)),
            fact(AutomationRan, run),  # the same run recorded again (a decision sent twice)
            fact(NotificationDelivered, an_outcome(notification_id, attempts=6)),
            fact(HomeTimezoneSet, TimezonePayload(timezone="UTC")),
        ]
    ):
        rows.add(home_row(encode_home_fact(record), 0, offset))
    assert [(r.run_id, r.journal_offset) for r in rows.runs.values()] == [(run.run_id, 0)]
    assert [(r.outcome, r.journal_offset) for r in rows.outcomes.values()] == [("notification.delivered", 3)]
