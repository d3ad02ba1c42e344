"""The device actor's twins table: what a worker keeps when a rebalance leaves it fewer partitions."""

from __future__ import annotations

import faust
import pytest

from hearth_device_actor.adapters.twin_table import TwinTable
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
