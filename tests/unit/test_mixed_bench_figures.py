"""The pure rules and figures of ``hearth bench mixed`` (hearth_bench.figures.mixed_figures)."""

from __future__ import annotations

import pytest

from hearth_bench.figures.mixed_figures import (
    command_figures,
    highest_sustained,
    p99_by_window,
    reading_account,
    search_rates,
    sender_short,
    sustained,
)

pytestmark = pytest.mark.unit


def test_a_step_is_sustained_while_its_second_half_stays_within_a_second_of_readings() -> None:
    # the first half may be far behind (the lag settling from the step before); it does not count
    assert sustained([50_000, 9_000, 4_000, 10_000], rate=10_000)
    assert not sustained([0, 0, 4_000, 10_001], rate=10_000)
    assert sustained([0, 0, 500, 500], rate=1_000, bound_s=0.5)
    assert not sustained([0, 0, 500, 501], rate=1_000, bound_s=0.5)


def test_a_step_without_samples_is_not_sustained() -> None:
    assert not sustained([], rate=1_000)


def test_the_search_multiplies_its_rate_up_to_the_top() -> None:
    assert search_rates(1_000, 2, 8_000) == [1_000, 2_000, 4_000, 8_000]
    assert search_rates(5_000, 1.25, 10_000) == [5_000, 6_250, 7_812, 9_765]
    assert search_rates(3_000, 2, 3_000) == [3_000]


@pytest.mark.parametrize(("start", "factor", "top"), [(0, 2, 10), (10, 1, 100), (10, 2, 5)])
def test_a_search_that_cannot_step_up_is_refused(start: float, factor: float, top: float) -> None:
    with pytest.raises(ValueError, match="a search needs"):
        search_rates(start, factor, top)


def test_the_ceiling_is_the_last_step_sustained_before_the_first_that_was_not() -> None:
    assert highest_sustained([(1_000, True), (1_950, True), (3_700, False), (9_000, True)]) == 1_950
    assert highest_sustained([(1_000, True), (2_000, True)]) == 2_000
    assert highest_sustained([(6_100, True), (4_200, True)]) == 6_100  # a sender that fell short
    assert highest_sustained([(1_000, False), (2_000, True)]) is None


def test_command_figures_time_each_command_from_its_request_and_count_how_it_ended() -> None:
    figures = command_figures(
        [
            {"submitted": 10.0, "accepted": 10.01, "dispatched": 10.02, "converged": 10.1},
            {"submitted": 20.0, "dispatched": 20.04, "superseded": 21.0},
            {"submitted": 30.0, "dispatched": 30.5},  # no terminal status yet
            {"dispatched": 40.0, "converged": 40.2},  # its request not found: no time
        ]
    )
    assert figures["commands"] == 4
    assert figures["to_dispatched_ms"]["count"] == 3
    assert figures["to_dispatched_ms"]["max"] == pytest.approx(500.0)
    assert figures["to_converged_ms"]["count"] == 1
    assert figures["to_converged_ms"]["p50"] == pytest.approx(100.0)
    assert figures["ended"] == {"converged": 2, "superseded": 1}
    assert figures["unfinished"] == 1
    # windows of 10 s from the first request: 10-20 s, 20-30 s, 30-40 s
    assert figures["dispatched_p99_ms_by_window"] == [
        pytest.approx(20.0),
        pytest.approx(40.0),
        pytest.approx(500.0),
    ]


def test_a_window_with_no_command_dispatched_has_no_p99() -> None:
    times = [{"submitted": 0.0, "dispatched": 0.1}, {"submitted": 25.0}]
    assert p99_by_window(times) == [pytest.approx(100.0), None, None]


def test_no_commands_have_empty_figures() -> None:
    assert command_figures([]) == {
        "commands": 0,
        "to_dispatched_ms": {"count": 0},
        "dispatched_p99_ms_by_window": [],
        "to_converged_ms": {"count": 0},
        "ended": {},
        "unfinished": 0,
    }


def test_every_reading_sent_is_a_fact_coalesced_or_late() -> None:
    assert reading_account(1_000, 700, 300)["unaccounted"] == 0
    assert reading_account(1_000, 690, 300)["unaccounted"] == 10  # lost
    assert reading_account(1_000, 690, 300, late=10)["unaccounted"] == 0  # no fact, counted
    folded_more = {"sent": 1_000, "facts": 700, "coalesced": 305, "late": 0, "unaccounted": -5}
    assert reading_account(1_000, 700, 305) == folded_more


def test_a_sender_more_than_five_percent_short_of_its_rate_ends_the_search() -> None:
    assert not sender_short(10_000, 9_500)
    assert sender_short(10_000, 9_499)
