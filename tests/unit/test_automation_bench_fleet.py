"""The automations bench's fleet, pure: its journal triggers exactly the runs the bench expects (one per
hot reading and automation watching the device), and no automation more often than its loop breaker
allows, so the engine, the backtests and the bench's own count agree."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from hearth_bench.load.automation_fleet import (
    HOME_SIZE,
    HOT_C,
    MIN_RUN_GAP,
    automations,
    journal_facts,
    reading,
)
from hearth_shared.domain.automation import DEFAULT_MAX_RUNS_PER_MINUTE
from hearth_shared.domain.automation_replay import HomeReplay, replayed
from hearth_shared.schema.events import Event

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 24, tzinfo=UTC)


@pytest.mark.parametrize(("count", "devices", "facts", "cross"), [(30, 20, 2_000, 10), (10, 40, 1_000, 5)])
def test_the_fleets_journal_fires_once_per_hot_reading_and_watcher(
    count: int, devices: int, facts: int, cross: int
) -> None:
    found = automations(count, devices, T0)
    by_home: dict[str, list[Event]] = defaultdict(list)
    for event in journal_facts(devices, facts, cross, T0 + timedelta(seconds=1)):
        by_home[event.home_id].append(event)
    assert all(len({e.device_id for e in events}) <= HOME_SIZE for events in by_home.values())
    fired: Counter[str] = Counter()
    for home, events in by_home.items():
        replay = HomeReplay([a for a in found if a.home_id == home], T0, T0 + timedelta(days=365), "UTC")
        for event in events:
            replay.feed(replayed(event))
        for automation in replay.automations:
            result = replay.results[automation.automation_id]
            assert automation.trigger.state is not None
            fired[automation.trigger.state.device_id] += result.fired
            gaps = [b - a for a, b in zip(result.fired_at, result.fired_at[1:], strict=False)]
            assert all(gap >= MIN_RUN_GAP for gap in gaps)
    assert timedelta(minutes=1) < MIN_RUN_GAP * DEFAULT_MAX_RUNS_PER_MINUTE  # never too many runs
    per_device = [facts // devices + (i < facts % devices) for i in range(devices)]
    hot = [
        sum(reading(n, cross, i) > reading(n - 1, cross, i) for n in range(2, r + 1))
        for i, r in enumerate(per_device)
    ]
    watchers = Counter(k % devices for k in range(count))
    assert sum(fired.values()) == sum(hot[i] * watchers[i] for i in range(devices)) > 0
    first_hot = Counter(
        min(n for n in range(2, 2 + cross) if reading(n, cross, i) == HOT_C) for i in range(devices)
    )
    assert len(first_hot) == cross and max(first_hot.values()) - min(first_hot.values()) <= 1  # spread
