"""The one wait loop's pace (hearth_devstack.waiting): quick at first, then a tenth of the time waited, at
most ``SLOWEST_S``; and a wait that runs out says what it waited for."""

from __future__ import annotations

import pytest

from hearth_devstack.waiting import SLOWEST_S, NotInTime, eventually, pause_s, steadily


def test_a_wait_polls_at_its_pace_first_then_a_tenth_of_the_time_waited_at_most_the_slowest() -> None:
    assert pause_s(0.05, 0.0) == 0.05
    assert pause_s(0.05, 0.3) == 0.05  # a tenth of 0.3 s is quicker than asked: as asked
    assert pause_s(0.05, 1.0) == pytest.approx(0.1)
    assert pause_s(0.05, 60.0) == SLOWEST_S
    assert pause_s(1.0, 60.0) == 1.0  # a wait that asked for slower polls keeps its pace
    assert pause_s(0, 60.0) == 0  # (a read to a topic's end: the fetch itself waits)


async def test_a_wait_that_runs_out_says_what_it_waited_for_and_the_last_value() -> None:
    checks = []

    def never() -> bool:
        checks.append(1)
        return False

    with pytest.raises(NotInTime, match="waiting for the impossible; last: 'seen'"):
        await eventually(never, "the impossible", timeout_s=0.3, every_s=0.01, shown=lambda: "seen")
    assert len(checks) > 3


async def test_steadily_waits_for_a_condition_to_hold_on_end_and_starts_again_when_it_breaks() -> None:
    answers = [True, True, False]  # then True at every check
    checks = 0

    def calm() -> bool:
        nonlocal checks
        checks += 1
        return answers[checks - 1] if checks <= len(answers) else True

    took = await steadily(calm, "the calm", for_s=0.03, every_s=0.01, timeout_s=5)
    assert took >= 0.03
    # Held from the 4th check on, each at least 10 ms after the one before: 30 ms on end by the 7th at the
    # earliest. (Counted from the first check instead, it would have ended at the 4th.)
    assert checks >= 7

    with pytest.raises(NotInTime, match="waiting for the calm for 1 s"):
        await steadily(lambda: False, "the calm", for_s=1, every_s=0.01, timeout_s=0.1)
