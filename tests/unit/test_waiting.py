"""The one wait loop's pace (hearth_devstack.waiting): quick at first, then a tenth of the time waited, at
most ``SLOWEST_S``; and a wait that runs out says what it waited for."""

from __future__ import annotations

import pytest

from hearth_devstack.waiting import SLOWEST_S, NotInTime, eventually, pause_s


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
