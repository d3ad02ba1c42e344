"""How the chaos tests and the scale-out drill count commands (``hearth_devstack.workload.command_ledger``)
and what the drill kills and reports (``hearth_bench.benches.drill``), without a stack."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from hearth_bench.benches.drill import DrillBench, calls_per_second, drill_result, probes_and_load, victims
from hearth_devstack.local import LocalStack
from hearth_devstack.workload import command_ledger
from hearth_devstack.workload.command_ledger import Ledger, NoAnswer, Outcome, submit
from hearth_shared.adapters.http_calls import GatedClient
from hearth_shared.schema.shards import assign_shard

pytestmark = pytest.mark.unit

CLEAN_JOURNAL = {
    "records": 10,
    "devices_out_of_order": [],
    "repeated_event_ids": 0,
    "repeated": [],
    "doubled_requests": 0,
    "doubled_commands": [],
}


def ledger_of(*commands: str) -> Ledger:
    ledger = Ledger()
    for n, command_id in enumerate(commands):
        ledger.accepted[command_id] = "t1"
        ledger.accepted_at[command_id] = float(n)
    return ledger


def test_unknown_is_lost_open_is_stuck_and_requested_twice_is_doubled() -> None:
    ledger = ledger_of("a", "b", "c", "d")
    statuses: dict[str, str | None] = {"a": "converged", "b": None, "c": "dispatched", "d": "expired"}
    outcome = Outcome.of(ledger, statuses, ["a", "not-ours"])
    assert outcome == Outcome(lost=["b"], doubled=["a"], stuck=["c"])
    assert outcome.among({"b", "d"}) == Outcome(lost=["b"], doubled=[], stuck=[])
    assert outcome.counts == {"lost": 1, "doubled": 1, "stuck": 1}


def test_a_command_never_read_back_is_lost() -> None:
    assert Outcome.of(ledger_of("a"), {}, []).lost == ["a"]


def test_the_drill_kills_one_of_each_kind_the_last_of_several(tmp_path: Path) -> None:
    stack = LocalStack(
        home=tmp_path, brokers=3, mqtt_brokers=2, device_actors=3, query_apis=2, analytics=False
    )
    killed = ["kafka-2", "mosquitto-1", "device-gateway-1", "device-actor.3", "query-api.2"]
    assert list(victims(stack)) == [*killed, "projector", "command-api"]
    single = LocalStack(home=tmp_path / "single", analytics=False)
    assert {"kafka", "mosquitto", "device-gateway", "device-actor", "query-api"} <= set(victims(single))


def test_each_shard_keeps_a_probe_device_out_of_the_load() -> None:
    devices = [f"d{i}" for i in range(20)]
    probes, load = probes_and_load(devices, ["0", "1"])
    assert [assign_shard(p, ["0", "1"]) for p in probes] == ["0", "1"]
    assert sorted([*probes, *load]) == sorted(devices) and not set(probes) & set(load)


def test_each_kill_counts_the_commands_accepted_since_the_previous_recovery() -> None:
    ledger = ledger_of("a", "b", "c")
    statuses: dict[str, str | None] = {"a": "converged", "b": None, "c": "expired"}
    kills = [
        {
            "part": "projector",
            "kind": "projector",
            "healthy_s": 1.0,
            "converged_s": 2.0,
            "commands": ["a"],
            "killed_at": 0.0,
            "client_held_s": 0.0,
        },
        {
            "part": "command-api",
            "kind": "command API",
            "healthy_s": 3.0,
            "converged_s": 4.0,
            "commands": ["b", "c"],
            "killed_at": 2.0,
            "client_held_s": 0.0,
        },
    ]
    result = drill_result(DrillBench(), ledger, statuses, kills, CLEAN_JOURNAL, differences=0)
    first, second = result["rows"]
    assert (first["commands"], first["lost"], first["expired"]) == (1, 0, 0)
    assert (second["commands"], second["lost"], second["expired"]) == (2, 1, 1)
    assert result["lost_total"] == 1 and not result["goal_met"]


def test_each_kill_says_the_longest_a_command_waited_for_its_202_and_the_clients_loop_was_held() -> None:
    ledger = ledger_of("a", "b", "c")
    ledger.waited.update({"a": 0.2, "b": 12.5, "c": 0.4})
    statuses: dict[str, str | None] = {"a": "converged", "b": "converged", "c": "converged"}
    kills = [
        {
            "part": "kafka-2",
            "kind": "Kafka broker",
            "healthy_s": 10.0,
            "converged_s": 12.0,
            "commands": ["a", "b"],
            "killed_at": 0.0,
            "client_held_s": 2.6,
        },
        {
            "part": "projector",
            "kind": "projector",
            "healthy_s": 5.0,
            "converged_s": 6.0,
            "commands": ["c"],
            "killed_at": 1.5,
            "client_held_s": 0.0,
        },
    ]
    result = drill_result(DrillBench(), ledger, statuses, kills, CLEAN_JOURNAL, 0)
    assert [row["slowest 202 s"] for row in result["rows"]] == ["12.5", "0.4"]
    assert [row["client held s"] for row in result["rows"]] == ["2.6", "0.0"]  # the drill's own loop


def test_the_calls_after_a_kill_are_kept_second_by_second_with_what_each_got() -> None:
    ledger = ledger_of("a", "b", "c")  # 202s at 0, 1 and 2 s
    ledger.failed_calls += [(0.5, "503"), (1.2, "ReadTimeout"), (1.7, "ReadTimeout")]
    seconds = calls_per_second(ledger, since=0.0, span_s=4)
    assert seconds == [{"202": 1, "503": 1}, {"202": 1, "ReadTimeout": 2}, {"202": 1}, {}]


async def test_a_command_never_taken_is_counted_and_fails_the_drill_without_ending_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(command_ledger, "GIVE_UP_S", 0.2)
    monkeypatch.setattr(command_ledger, "RETRY_EVERY_S", 0.01)
    unavailable = httpx.MockTransport(lambda request: httpx.Response(503, json={"detail": "no broker"}))
    ledger = Ledger()
    async with GatedClient(transport=unavailable, base_url="http://api") as api:
        with pytest.raises(NoAnswer):
            await submit(api, ledger, "t1", 20.0)
    assert ledger.gave_up == ["t1"] and {what for _, what in ledger.failed_calls} == {"503"}
    result = drill_result(DrillBench(), ledger, {}, [], CLEAN_JOURNAL, 0)
    assert result["never_accepted"] == 1 and not result["goal_met"]
