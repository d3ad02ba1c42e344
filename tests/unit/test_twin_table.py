"""The device actor's twins table: what a worker keeps when a rebalance leaves it fewer partitions."""

from __future__ import annotations

import faust
import pytest
from faust.types import TP

from hearth_device_actor.adapters.twin_table import TwinTable, recovery_of
from hearth_shared.adapters.kafka import partition_of

pytestmark = pytest.mark.unit


def test_a_worker_forgets_the_twins_of_partitions_it_no_longer_holds() -> None:
    app = faust.App("unit-twins", store="memory://", web_enabled=False)
    table = TwinTable(app, name="twins", default=None, partitions=12, key_type=bytes, value_type=bytes)
    app.tables.add(table)
    keys = [f"thermostat-{i}".encode() for i in range(200)]
    for key in keys:  # written by this worker itself, as the actors do: not read from the changelog
        table.data[key] = b"twin"

    table._forget_twins_not_in({0, 5, 11})

    kept = set(table.data.data)
    assert kept == {k for k in keys if partition_of(k) in {0, 5, 11}}
    assert 0 < len(kept) < len(keys)


def telling_table(name: str) -> tuple[faust.App, TwinTable, list[set[int]]]:
    """A twins table whose ``on_recovered`` calls are recorded (the partitions each call was told)."""
    app = faust.App(name, store="memory://", web_enabled=False)
    table = TwinTable(app, name="twins", default=None, partitions=12, key_type=bytes, value_type=bytes)
    app.tables.add(table)
    told: list[set[int]] = []

    async def on_recovered(partitions: set[int]) -> None:
        told.append(partitions)

    table.on_recovered = on_recovered
    return app, table, told


async def test_a_recovery_that_a_newer_assignment_cut_short_is_not_acted_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """faust tells the tables a recovery completed before it checks for a newer rebalance: the worker
    must act only on the recovery of the assignment it has now (a drill found the other journaling a
    stale twin's facts)."""
    app, table, told = telling_table("unit-twins-gen")
    changelog = table.changelog_topic.get_topic_name()
    now = {TP(changelog, 1), TP(changelog, 4), TP("some-other-topic", 3)}
    monkeypatch.setattr(app.assignor, "assigned_actives", lambda: now)

    await table.on_recovery_completed({TP(changelog, 1), TP(changelog, 3)}, set())  # the older assignment's
    assert told == []

    await table.on_recovery_completed({TP(changelog, 1), TP(changelog, 4)}, set())  # the current one's
    assert told == [{1, 4}]


async def test_a_cut_short_recovery_whose_partitions_match_the_new_assignment_is_not_acted_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """By the time faust tells of a recovery a newer rebalance cut short, the recovery's partitions are
    already the newer assignment's: only the newer recovery's pending start tells (a drill found two
    workers recovered to v24 of a device whose changelog held v202)."""
    app, table, told = telling_table("unit-twins-pending")
    changelog = table.changelog_topic.get_topic_name()
    now = {TP(changelog, 2), TP(changelog, 6)}
    monkeypatch.setattr(app.assignor, "assigned_actives", lambda: now)
    recovery = recovery_of(app)

    recovery.signal_recovery_start.set()  # a rebalance came while this recovery was reading
    await table.on_recovery_completed(now, set())
    assert told == []

    recovery.signal_recovery_start.clear()  # faust's loop took it up: this is the newer recovery
    await table.on_recovery_completed(now, set())
    assert told == [{2, 6}]
