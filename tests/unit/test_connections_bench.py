"""``hearth bench connections`` (issue 21): how many brokers it runs and how its figures read."""

from __future__ import annotations

import pytest

from hearth_bench.benches.connections import PER_BROKER, brokers_for, connections_result

pytestmark = pytest.mark.unit


def test_one_broker_per_open_files_worth_of_devices_unless_told() -> None:
    assert brokers_for(10_000, 0) == 1
    assert brokers_for(100_000, 0) == 6 == -(-100_000 // PER_BROKER)
    assert brokers_for(100_000, 8) == 8


def test_each_part_counts_its_own_brokers_connections_and_the_goal_is_met_only_when_all_held() -> None:
    held = {
        "held": 100_000,
        "seconds": 41.5,
        "failed": 0,
        "errors": [],
        "still_connected": 100_000,
        "held_per_broker": {"mosquitto": 60_000, "mosquitto-1": 40_000},
        "connections_of": {"mosquitto": 60_000, "mosquitto-1": 40_000, "device-gateway": 60_000},
        "rss_before_mb": {"mosquitto": 10.0, "mosquitto-1": 10.0, "device-gateway": 50.0},
        "rss_after_mb": {"mosquitto": 200.0, "mosquitto-1": 140.0, "device-gateway": 55.0},
        "kib_per_connection": {"mosquitto": 3.24, "mosquitto-1": 3.33, "device-gateway": 0.09},
        "holder_rss_mb": 400.0,
    }
    result = connections_result(held, devices=100_000, brokers=2, open_files=20_000)
    assert [(r["part"], r["connections"]) for r in result["rows"]] == [
        ("mosquitto", 60_000),
        ("mosquitto-1", 40_000),
        ("device-gateway", 60_000),
    ]
    assert "3.24 to 3.33 KiB" in result["notes"] and result["notes"].endswith("measured: met.")
    short = connections_result(
        held | {"held": 99_000, "failed": 1_000}, devices=100_000, brokers=2, open_files=1
    )
    assert short["notes"].endswith("measured: not met.")
