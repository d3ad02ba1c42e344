"""The engine's sends batched (``hearth_automations.service.effect_batch``): a group of facts is decided one
fact after another, as before, and its effects wait for ``flush``, which writes every command, then
(once they are acked) every run fact, then enqueues the notifications. A failed write fails the flush:
nothing after it is written, then or later. A crash between the commands and the run facts (the fact
write failing) leaves commands that a restarted engine sends again with the very same ids."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import msgspec
import pytest

from hearth_automations.service.effect_batch import FlushFailed
from hearth_shared.domain.automation import Automation, StateTest, Trigger, action_id, run_id
from hearth_shared.domain.home_facts import AutomationRan, AutomationSuspended
from hearth_shared.schema.events import Event, SubmitCommand
from tests.support.engine_facts import T0, automation, converged, created, engine_over, report
from tests.support.fakes import FakeEnginePath, FakeNotify

pytestmark = pytest.mark.unit


def hot(device_id: str) -> Trigger:
    return Trigger(state=StateTest(device_id=device_id, key="ambient_c", above=25))


def readings(*values: tuple[str, float]) -> list[Event]:
    """Reports 5 s apart: (device, ambient_c) each."""
    return [report(T0 + timedelta(seconds=5 * (n + 1)), d, ambient_c=v) for n, (d, v) in enumerate(values)]


async def test_a_group_sends_its_commands_in_one_write_then_its_run_facts_then_notifies() -> None:
    first, second = automation(hot("t1"), device_id="t1"), automation(hot("t2"), device_id="t2", notify=True)
    path, notify = FakeEnginePath(), FakeNotify()
    e = engine_over(path, [created(first), created(second)], notify)
    for fact in readings(("t1", 20), ("t2", 20), ("t1", 30), ("t2", 30), ("t1", 20), ("t1", 31)):
        await e.evaluate(fact)
    assert path.written == [] and notify.sent == []  # decided, not yet sent
    await e.flush()
    commands_written, facts_written = path.written
    commands = [c for c in commands_written if isinstance(c, SubmitCommand)]
    facts = [f for f in facts_written if isinstance(f, AutomationRan)]
    assert len(commands) == len(commands_written) == 3 and len(facts) == len(facts_written) == 3
    actions = [a for f in facts for a in f.payload.actions]
    # every run's command written before its run fact (in the same order)
    assert [a.action_id for a in actions if a.kind == "command"] == [c.command_id for c in commands]
    assert notify.sent == [a.action_id for a in actions if a.kind == "notify"] and len(notify.sent) == 1
    await e.flush()  # nothing new: nothing written
    assert len(path.written) == 2


def history(automations: list[Automation]) -> list[Event]:
    """Hot and calm readings of t1 and t2, and the convergence of some commands the runs send (their
    ids are derived from the trigger facts, so known in advance); a command that was not sent is a
    fact the engine ignores."""
    facts: list[Event] = []
    at = T0
    for n in range(40):
        at += timedelta(seconds=2)
        device = "t1" if n % 3 else "t2"
        reading = report(at, device, ambient_c=30 if n % 4 == 1 else 20)
        facts.append(reading)
        if n % 4 == 1 and n % 8 == 1:  # every other hot reading's commands end soon after
            for a in automations:
                at += timedelta(milliseconds=1)
                facts.append(converged(action_id(run_id(a.automation_id, reading.event_id), 0), device, at))
    return facts


async def test_batched_the_engine_decides_and_writes_what_it_did_one_fact_at_a_time() -> None:
    found = [
        automation(hot("t1"), device_id="t1", mode="single"),
        automation(hot("t1"), device_id="t1", mode="queued", notify=True),
        automation(hot("t2"), device_id="t2", mode="restart"),
        automation(hot("t2"), device_id="t2", mode="parallel"),
        msgspec.structs.replace(automation(hot("t1"), device_id="t1"), max_runs_per_minute=2),
    ]
    home = [created(a) for a in found]
    facts = history(found)
    alone, alone_notify = FakeEnginePath(), FakeNotify()
    one_by_one = engine_over(alone, home, alone_notify)
    for fact in facts:
        await one_by_one.on_fact(fact)
    grouped, grouped_notify = FakeEnginePath(), FakeNotify()
    batched = engine_over(grouped, home, grouped_notify)
    for start in range(0, len(facts), 13):
        for fact in facts[start : start + 13]:
            await batched.evaluate(fact)
        await batched.flush()
    assert grouped.requests == alone.requests and grouped.facts == alone.facts
    assert grouped_notify.sent == alone_notify.sent
    fired = [f for f in alone.facts if isinstance(f, AutomationRan) and f.payload.fired]
    admissions = {f.payload.admission for f in alone.facts if isinstance(f, AutomationRan)}
    assert len(fired) > 5 and admissions == {"start", "drop", "queue"}, admissions  # the modes took part
    assert any(isinstance(f, AutomationSuspended) for f in alone.facts)  # and the loop breaker
    groups = range(0, len(facts), 13)
    assert len(grouped.written) <= 2 * len(groups) < len(alone.written)  # at most 2 writes per group


async def test_a_failed_command_write_fails_the_flush_and_nothing_after_it_is_ever_written() -> None:
    a = automation(hot("t1"), device_id="t1", notify=True)
    path, notify = FakeEnginePath(), FakeNotify()
    e = engine_over(path, [created(a)], notify)
    for fact in readings(("t1", 20), ("t1", 30)):
        await e.evaluate(fact)
    path.fail_send = ConnectionError("the broker is gone")
    with pytest.raises(FlushFailed):
        await e.flush()
    assert path.written == [] and notify.sent == []  # no run fact without its command, no notification
    for fact in readings(("t1", 20), ("t1", 40)):  # the broker is back: still nothing (only a restart)
        await e.evaluate(fact)
    with pytest.raises(FlushFailed):
        await e.flush()
    assert path.written == [] and notify.sent == []


async def test_killed_between_a_groups_commands_and_its_run_facts_a_restart_sends_the_same_ids() -> None:
    a = automation(hot("t1"), device_id="t1", notify=True)
    facts = readings(("t1", 20), ("t1", 30), ("t1", 20), ("t1", 35))
    path, notify = FakeEnginePath(), FakeNotify()
    e = engine_over(path, [created(a)], notify)
    for fact in facts:
        await e.evaluate(fact)
    path.fail_append = ConnectionError("killed while the run facts were on their way")
    with pytest.raises(FlushFailed):
        await e.flush()
    assert len(path.requests) == 2 and path.facts == [] and notify.sent == []
    again, again_notify = FakeEnginePath(), FakeNotify()
    restarted = engine_over(again, [created(a)], again_notify)  # the home journal holds no run of them
    for fact in facts:  # the journal read again from its start
        await restarted.on_fact(fact)
    assert [r.command_id for r in again.requests] == [r.command_id for r in path.requests]
    assert len([f for f in again.facts if isinstance(f, AutomationRan)]) == 2 and len(again_notify.sent) == 2


async def test_a_flush_asked_for_while_a_failing_one_sends_writes_nothing() -> None:
    a = automation(hot("t1"), device_id="t1")
    path = FakeEnginePath()
    e = engine_over(path, [created(a)])
    first, second = readings(("t1", 20), ("t1", 30)), readings(("t1", 20), ("t1", 40))
    for fact in first:
        await e.evaluate(fact)
    path.fail_send = ConnectionError("the broker is gone")
    sending = asyncio.ensure_future(e.flush())  # the feed's flush, waiting for its acks
    await asyncio.sleep(0)
    for fact in second:  # meanwhile the tick decides another run and flushes it
        await e.evaluate(fact)
    outcomes = await asyncio.gather(sending, e.flush(), return_exceptions=True)
    assert [type(o) for o in outcomes] == [FlushFailed, FlushFailed]
    assert path.written == []
