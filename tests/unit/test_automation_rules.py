"""Automation decisions, pure: triggers (fact, state edge), conditions, modes, the loop breaker, derived
ids; and the webhook signature a receiver checks."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hearth_automations.adapters.webhooks import signature
from hearth_automations.service.rules import (
    LoopBreaker,
    admit,
    conditions_hold,
    fact_triggers,
    state_triggers,
)
from hearth_shared.domain.automation import (
    Action,
    NotifyAction,
    RuleInvalid,
    StateTest,
    TimeOfDay,
    Trigger,
    action_id,
    check_rule,
    run_id,
)

pytestmark = pytest.mark.unit
NOTIFY = (Action(notify=NotifyAction(message="x")),)

T0 = datetime(2026, 7, 1, tzinfo=UTC)


def test_a_fact_trigger_matches_its_type_and_device() -> None:
    any_device = Trigger(fact="anomaly.detected")
    one = Trigger(fact="anomaly.detected", device_id="t1")
    assert fact_triggers(any_device, ("anomaly.detected",), "t2")
    assert fact_triggers(one, ("anomaly.detected",), "t1")
    assert not fact_triggers(one, ("anomaly.detected",), "t2")
    assert not fact_triggers(any_device, ("command.failed",), "t1")


def test_a_state_trigger_fires_on_the_edge_not_while_it_holds() -> None:
    trigger = Trigger(state=StateTest(device_id="t1", key="ambient_c", above=25))
    assert state_triggers(trigger, "t1", {"ambient_c": 24}, {"ambient_c": 26})
    assert state_triggers(trigger, "t1", {}, {"ambient_c": 26})
    assert not state_triggers(trigger, "t1", {"ambient_c": 26}, {"ambient_c": 27})
    assert not state_triggers(trigger, "t1", {"ambient_c": 26}, {"humidity_pct": 40})
    assert not state_triggers(trigger, "t2", {}, {"ambient_c": 30})
    equals = Trigger(state=StateTest(device_id="l1", key="lock_state", equals="jammed"))
    assert state_triggers(equals, "l1", {"lock_state": "locking"}, {"lock_state": "jammed"})


def test_conditions_read_the_last_reported_state_and_a_missing_value_does_not_hold() -> None:
    tests = (
        StateTest(device_id="t1", key="ambient_c", below=20),
        StateTest(device_id="l1", key="door", equals="closed"),
    )
    assert conditions_hold(tests, {"t1": {"ambient_c": 18}, "l1": {"door": "closed"}}) == [True, True]
    assert conditions_hold(tests, {"t1": {"ambient_c": 21}}) == [False, False]
    assert conditions_hold(
        (StateTest(device_id="t1", key="ambient_c", above=1),), {"t1": {"ambient_c": "x"}}
    ) == [False]


@pytest.mark.parametrize(
    ("mode", "running", "expected"),
    [
        ("single", 0, "start"), ("single", 1, "drop"),
        ("restart", 1, "start"), ("queued", 1, "queue"), ("queued", 0, "start"), ("parallel", 3, "start"),
    ],
)  # fmt: skip
def test_modes_admit_a_trigger_while_a_run_is_on(mode: str, running: int, expected: str) -> None:
    assert admit(mode, running) == expected  # type: ignore[arg-type]


def test_the_loop_breaker_stops_a_run_caused_by_its_own_command() -> None:
    breaker = LoopBreaker(max_runs_per_minute=10)
    mine = uuid.uuid4()
    breaker.ran(T0, [mine])
    assert breaker.check(mine, T0 + timedelta(seconds=1)) == "own_action"
    assert breaker.check(uuid.uuid4(), T0 + timedelta(seconds=1)) is None
    assert breaker.check(None, T0 + timedelta(seconds=1)) is None


def test_the_loop_breaker_stops_more_than_n_runs_a_minute_on_fact_time() -> None:
    breaker = LoopBreaker(max_runs_per_minute=3)
    for i in range(3):
        assert breaker.check(None, T0 + timedelta(seconds=i)) is None
        breaker.ran(T0 + timedelta(seconds=i), [])
    assert breaker.check(None, T0 + timedelta(seconds=10)) == "too_many_runs"
    assert breaker.check(None, T0 + timedelta(seconds=61)) is None  # the first run left the window


def test_run_and_action_ids_are_derived_so_a_replay_sends_the_same() -> None:
    automation, fact = uuid.uuid4(), uuid.uuid4()
    assert run_id(automation, fact) == run_id(automation, fact)
    assert run_id(automation, fact) != run_id(automation, uuid.uuid4())
    run = run_id(automation, fact)
    assert action_id(run, 0) != action_id(run, 1)


@pytest.mark.parametrize(
    ("trigger", "actions", "reason"),
    [
        (Trigger(), (Action(notify=NotifyAction(message="x")),), "invalid_trigger"),
        (Trigger(fact="a.b", state=StateTest(device_id="t", key="k", above=1)), (), "invalid_trigger"),
        (
            Trigger(state=StateTest(device_id="t", key="k")),
            (Action(notify=NotifyAction(message="x")),),
            "invalid_test",
        ),
        (Trigger(fact="a.b"), (), "no_actions"),
        (Trigger(fact="a.b"), (Action(),), "invalid_action"),
        (Trigger(fact="a.b", time=TimeOfDay(at="07:00")), NOTIFY, "invalid_trigger"),
        (Trigger(time=TimeOfDay(at="07:00"), device_id="t"), NOTIFY, "invalid_trigger"),
        (Trigger(time=TimeOfDay(at="25:00")), NOTIFY, "invalid_time"),
        (Trigger(time=TimeOfDay(at="07:00", days=("mon", "someday"))), NOTIFY, "unknown_day"),
        (Trigger(time=TimeOfDay(at="07:00", days=())), NOTIFY, "no_days"),
        (Trigger(state=StateTest(device_id="t", key="k", above=1, for_s=0)), NOTIFY, "invalid_for_s"),
        (Trigger(state=StateTest(device_id="t", key="k", above=1, for_s=1e300)), NOTIFY, "invalid_for_s"),
    ],
)
def test_a_rule_that_cannot_run_is_refused(
    trigger: Trigger, actions: tuple[Action, ...], reason: str
) -> None:
    with pytest.raises(RuleInvalid) as caught:
        check_rule(trigger, (), actions)
    assert caught.value.reason == reason


def test_for_s_belongs_to_the_trigger_and_a_time_trigger_is_checked_as_a_schedule_entry() -> None:
    held = StateTest(device_id="t", key="k", above=1, for_s=30)
    check_rule(Trigger(state=held), (), NOTIFY)
    check_rule(Trigger(time=TimeOfDay(at="06:30:15", days=("sat", "sun"))), (), NOTIFY)
    with pytest.raises(RuleInvalid) as caught:
        check_rule(Trigger(fact="a.b"), (held,), NOTIFY)
    assert caught.value.reason == "for_s_in_condition" and caught.value.where == ("conditions", "for_s")
    with pytest.raises(RuleInvalid) as caught:
        check_rule(Trigger(time=TimeOfDay(at="07:00", days=("mon", "xyz"))), (), NOTIFY)
    assert caught.value.where == ("trigger", "time", "days")


def test_not_equals_holds_for_any_other_value_and_a_missing_value_does_not_hold() -> None:
    test = StateTest(device_id="t1", key="hvac_mode", not_equals="off")
    assert conditions_hold((test,), {"t1": {"hvac_mode": "heat"}}) == [True]
    assert conditions_hold((test,), {"t1": {"hvac_mode": "off"}}) == [False]
    assert conditions_hold((test,), {"t1": {}}) == [False]


def test_the_signature_is_hmac_sha256_of_the_exact_body() -> None:
    body = b'{"message":"hello"}'
    expected = hmac.new(b"s3cret-s3cret-s3cret", body, hashlib.sha256).hexdigest()
    assert signature("s3cret-s3cret-s3cret", body) == f"sha256={expected}"
    assert signature("s3cret-s3cret-s3cret", body + b" ") != f"sha256={expected}"


def test_a_backtest_counts_the_triggers_whose_conditions_held() -> None:
    from hearth_shared.domain.automation import Automation
    from hearth_shared.domain.automation_replay import backtest

    automation = Automation(
        automation_id=uuid.uuid4(), home_id="h", name="hot", created_at=T0,
        trigger=Trigger(state=StateTest(device_id="t1", key="ambient_c", above=25)),
        conditions=(StateTest(device_id="l1", key="door", equals="closed"),),
        actions=(Action(notify=NotifyAction(message="hot")),),
    )  # fmt: skip
    at = [T0 + timedelta(minutes=i) for i in range(6)]
    reported = ("device.state_reported",)
    facts: list[tuple[tuple[str, ...], str, datetime, dict[str, Any] | None]] = [
        (reported, "l1", at[0], {"door": "closed"}),
        (reported, "t1", at[1], {"ambient_c": 26}),  # edge, door closed: fires
        (reported, "t1", at[2], {"ambient_c": 27}),  # still above: no edge
        (reported, "t1", at[3], {"ambient_c": 20}),
        (reported, "l1", at[4], {"door": "open"}),
        (reported, "t1", at[5], {"ambient_c": 30}),  # edge, door open: does not fire
    ]
    result = backtest(automation, facts, T0, T0 + timedelta(days=1), "UTC")
    assert (result.facts, result.triggered, result.fired, result.fired_at) == (6, 2, 1, [at[1]])
