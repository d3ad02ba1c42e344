"""The waves a stack's parts stop in (hearth_devstack.supervision.part_order): dependants first, the rest
together."""

from __future__ import annotations

import pytest

from hearth_devstack.supervision.part_order import stop_waves

pytestmark = pytest.mark.unit


def test_a_part_stops_after_every_part_that_depends_on_it_and_parts_between_nothing_together() -> None:
    brokers = ["kafka-1", "kafka-2", "kafka-3"]
    depends_on = {
        "broker-access": [*brokers, "mosquitto"],
        "device-actor": brokers,
        "device-gateway": [*brokers, "mosquitto", "broker-access"],
        "projector": [*brokers, "postgres", "redis"],
        "command-api": brokers,
        "simulator": [*brokers, "command-api", "mosquitto", "device-gateway"],
    }
    names = [*brokers, "mosquitto", "postgres", "redis", *depends_on]
    assert stop_waves(names, depends_on) == [
        ["simulator", "projector", "device-actor"],  # nothing depends on them; reverse start order
        ["command-api", "device-gateway", "redis", "postgres"],
        ["broker-access"],
        ["mosquitto", "kafka-3", "kafka-2", "kafka-1"],  # a cluster's nodes in one wave
    ]


def test_an_old_status_file_without_dependencies_stops_everything_at_once() -> None:
    assert stop_waves(["kafka", "projector"], {}) == [["projector", "kafka"]]


def test_unknown_dependencies_are_ignored_and_a_cycle_still_stops() -> None:
    assert stop_waves(["a", "b"], {"a": ["gone"], "b": ["a"]}) == [["b"], ["a"]]
    assert stop_waves(["a", "b", "c"], {"a": ["b"], "b": ["a"], "c": ["a"]}) == [["c"], ["b", "a"]]
