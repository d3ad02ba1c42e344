"""``hearth bench restart``'s own rules: the sizes it reads, and how it judges issue 20's goal (healthy
within 10 s at the largest size and within 1.2x the 1-million time; RSS within 1.1x) and says what
falls short."""

from __future__ import annotations

import pytest

from hearth_bench.benches.restart import Restart, judge, median, parse_sizes, size_label, started_from
from hearth_devstack.supervision.status import FollowerReport

pytestmark = pytest.mark.unit


def restart(part: str, facts: int, healthy_s: float | None, rss_mb: float = 100.0) -> Restart:
    return Restart(part, facts, healthy_s, healthy_s, rss_mb, 0, "snapshot", 1.0)


def test_sizes_are_read_with_k_and_m_and_must_grow() -> None:
    assert parse_sizes("1m,5m,20m") == [1_000_000, 5_000_000, 20_000_000]
    assert parse_sizes("200k, 1.5M,3000000") == [200_000, 1_500_000, 3_000_000]
    assert [size_label(n) for n in (200_000, 1_500_000, 20_000_000, 999)] == ["200k", "1.5m", "20m", "999"]
    for wrong in ("5m,1m", "1m,1m", "1g", "", "0"):
        with pytest.raises(ValueError, match="size"):
            parse_sizes(wrong)


def test_the_goal_is_judged_against_the_1m_time_and_10_s_at_the_largest_size() -> None:
    sizes = [1_000_000, 5_000_000, 20_000_000]
    restarts = [
        restart("command-api", 1_000_000, 2.0),
        restart("command-api", 5_000_000, 2.3),  # 1.15x: within
        restart("command-api", 20_000_000, 2.6, rss_mb=115.0),  # 1.3x, and RSS 1.15x
        restart("device-actor", 1_000_000, 9.0),
        restart("device-actor", 5_000_000, 9.5),
        restart("device-actor", 20_000_000, 10.5),  # over 10 s, 1.17x: within the growth
        restart("projector", 1_000_000, 1.0),
        restart("projector", 5_000_000, None),  # never healthy again
        restart("projector", 20_000_000, 1.1),
    ]
    verdicts, shortfalls = judge(restarts, sizes)
    assert verdicts[("command-api", 1_000_000)].ok and verdicts[("command-api", 5_000_000)].ok
    assert not verdicts[("command-api", 20_000_000)].ok
    assert verdicts[("command-api", 20_000_000)].short == "time 1.30x, RSS 1.15x"
    assert (
        verdicts[("command-api", 20_000_000)].problems[0].startswith("1.30x its time at 1m (2.6 s vs 2.0 s")
    )
    assert verdicts[("device-actor", 20_000_000)].problems == ("10.5 s to healthy (goal 10 s)",)
    assert verdicts[("device-actor", 20_000_000)].short == "> 10 s"
    assert verdicts[("device-actor", 5_000_000)].ok and verdicts[("device-actor", 5_000_000)].short == "ok"
    assert verdicts[("projector", 5_000_000)].short == "never healthy"
    assert verdicts[("projector", 20_000_000)].ok
    assert len(shortfalls) == 4 and all(" at " in s for s in shortfalls)
    assert shortfalls[0].startswith("command-api at 20m facts: 1.30x")


def test_without_a_1m_run_the_first_size_is_the_baseline() -> None:
    sizes = [200_000, 500_000]
    verdicts, shortfalls = judge(
        [restart("campaigns", 200_000, 1.0), restart("campaigns", 500_000, 1.5)], sizes
    )
    (problem,) = verdicts[("campaigns", 500_000)].problems
    assert problem.startswith("1.50x its time at 200k")
    assert shortfalls == [f"campaigns at 500k facts: {problem}"]


def test_a_size_below_1m_is_not_judged_by_its_growth_only_the_largest_by_10_s() -> None:
    sizes = [200_000, 1_000_000]
    restarts = [restart("query-api", 200_000, 21.0), restart("query-api", 1_000_000, 10.8, rss_mb=500.0)]
    verdicts, shortfalls = judge(restarts, sizes)
    assert verdicts[("query-api", 200_000)].ok  # slower than at 1m, but the goal compares sizes above it
    assert verdicts[("query-api", 1_000_000)].short == "> 10 s"
    assert shortfalls == ["query-api at 1m facts: 10.8 s to healthy (goal 10 s)"]


def test_where_a_parts_followers_started_is_counted_without_the_reasons() -> None:
    reports = [
        FollowerReport("command-api", "registry", "snapshot", replayed=12),
        FollowerReport("command-api", "revocations", "first offset", replayed=3),
        FollowerReport("command-api", "campaign-feed", "first offset (no snapshot yet)", replayed=0),
    ]
    assert started_from(reports) == "2x first offset, snapshot"
    assert started_from([]) == "-"


def test_several_kills_are_judged_by_their_median_and_one_never_healthy_is_never_healthy() -> None:
    kills = [
        restart("projector", 1_000_000, 1.9, rss_mb=98.0),
        restart("projector", 1_000_000, 1.3, rss_mb=97.0),
        restart("projector", 1_000_000, 1.4, rss_mb=120.0),
    ]
    middle = median(kills)
    assert (middle.healthy_after_s, middle.rss_mb, middle.kills) == (1.4, 98.0, 3)
    assert middle.spread == "1.3-1.9 s, 97-120 MB"
    assert median([*kills, restart("projector", 1_000_000, None)]).healthy_after_s is None
    assert median(kills[:1]).spread == ""
