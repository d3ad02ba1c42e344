"""The simulated gateway's core, without a broker: discovery, reports and their faults, commands and acks."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from hearth_device import Command
from hearth_device_gateway.service.edge import translate
from hearth_shared.adapters.topics import Topics
from hearth_shared.schema.events import (
    AcknowledgeCommand,
    DeviceRegistered,
    DeviceRegisteredPayload,
    DeviceShardMoved,
    ReportState,
    ShardMovedPayload,
    StateReported,
    StateReportedPayload,
    encode,
)
from hearth_simulator.devices.sim_lock import SimLock
from hearth_simulator.devices.sim_thermostat import SimThermostat
from hearth_simulator.fleet import Fleet, FleetOptions
from hearth_simulator.registration import fleet_devices
from hearth_simulator.settings import SimulatorSettings

pytestmark = pytest.mark.unit

T0 = 1_767_268_800.0  # 2026-01-01 12:00 UTC


def fleet(**options: object) -> Fleet:
    return Fleet("unused:9092", Topics("test"), FleetOptions(**options))  # type: ignore[arg-type]


def registered(
    device_id: str, device_type: str, version: int = 1, *, simulated: bool = True, shard: str = "0"
) -> DeviceRegistered:
    at = datetime.fromtimestamp(T0, UTC)
    return DeviceRegistered(
        event_id=uuid.uuid4(),
        device_id=device_id,
        home_id="home-1",
        version=version,
        occurred_at=at,
        recorded_at=at,
        payload=DeviceRegisteredPayload(
            device_type=device_type, name=device_id, simulated=simulated, shard=shard
        ),
    )


def moved(device_id: str, shard: str) -> DeviceShardMoved:
    at = datetime.fromtimestamp(T0, UTC)
    payload = ShardMovedPayload(shard=shard, from_shard="?")
    return DeviceShardMoved(
        event_id=uuid.uuid4(),
        device_id=device_id,
        home_id="home-1",
        version=2,
        occurred_at=at,
        recorded_at=at,
        payload=payload,
    )


def command(device_id: str, name: str, params: dict[str, object], expires_in_s: float = 30) -> Command:
    return Command(
        command_id=uuid.uuid4(),
        device_id=device_id,
        name=name,
        params=params,
        expires_at=datetime.fromtimestamp(T0 + expires_in_s, UTC),
    )


def play(
    gateway: Fleet, start: float, until: float, every: float = 0.05
) -> list[ReportState | AcknowledgeCommand]:
    """Tick the hub over ``(start, until]``; every MQTT message it published, as the device gateway
    turns it into an inbox request."""
    sent = []
    for i in range(1, round((until - start) / every) + 1):
        now = start + i * every
        for topic, payload in gateway.tick(now):
            message = translate(topic, payload, datetime.fromtimestamp(now, UTC))
            assert isinstance(message.request, ReportState | AcknowledgeCommand) and not message.refused
            sent.append(message.request)
            if message.answer is not None:  # an ack's report, after the ack
                sent.append(message.answer)
    return sent


def reports(sent: list[ReportState | AcknowledgeCommand], device_id: str) -> list[ReportState]:
    return [r for r in sent if isinstance(r, ReportState) and r.device_id == device_id]


def test_it_plays_the_simulated_devices_of_the_types_it_knows() -> None:
    gateway = fleet()
    gateway.learn(registered("real-1", "thermostat", simulated=False), T0)  # a real device: not ours
    gateway.learn(registered("t1", "thermostat"), T0)
    gateway.learn(registered("l1", "lock"), T0)
    gateway.learn(registered("x1", "toaster"), T0)
    gateway.learn(registered("t1", "thermostat"), T0)  # seen twice (a replay): still one device

    assert sorted(gateway.players) == ["l1", "t1"]
    assert isinstance(gateway.players["t1"].model, SimThermostat)
    assert isinstance(gateway.players["l1"].model, SimLock)
    sent = play(gateway, T0, T0 + 10)
    for device_id in ("t1", "l1"):
        seqs = [r.device_seq for r in reports(sent, device_id)]
        assert 9 <= len(seqs) <= 11, "about one report a second"
        assert seqs == sorted(set(seqs)), "device_seq only grows"
        assert seqs[0] > 1_000 * T0 - 1, "and starts from the clock, so it survives restarts"


def test_a_gateway_restarting_takes_up_what_its_devices_said_last() -> None:
    gateway = fleet()
    gateway.learn(registered("t1", "thermostat"), T0)
    at = datetime.fromtimestamp(T0, UTC)
    said = StateReportedPayload(
        reported={"target_c": 25.5, "hvac_mode": "cool"}, device_seq=10**14, device_time=at
    )
    gateway.learn(
        StateReported(
            event_id=uuid.uuid4(),
            device_id="t1",
            home_id="home-1",
            version=2,
            occurred_at=at,
            recorded_at=at,
            payload=said,
        ),
        T0,
    )
    first = reports(play(gateway, T0, T0 + 2), "t1")[0]
    assert first.device_seq == 10**14 + 1
    assert (first.state["target_c"], first.state["hvac_mode"]) == (25.5, "cool")


def reported_fact(device_id: str, seq: int, reported: dict[str, object], at_s: float) -> StateReported:
    at = datetime.fromtimestamp(at_s, UTC)
    return StateReported(
        event_id=uuid.uuid4(),
        device_id=device_id,
        home_id="home-1",
        version=2,
        occurred_at=at,
        recorded_at=at,
        payload=StateReportedPayload(reported=reported, device_seq=seq, device_time=at),
    )


def test_a_playing_hub_stands_aside_while_another_writer_reports_its_device() -> None:
    """``hearth simulate --history`` writes reports for a device the hub plays, seqs above the hub's: the
    hub falls silent while they come, then plays on from the last one, its seqs above it."""
    gateway = fleet(rate=1.0)
    aside = gateway.options.stand_aside_s
    gateway.learn(registered("t1", "thermostat"), T0)
    own = reports(play(gateway, T0, T0 + 3), "t1")
    assert own
    for report in own:  # its own reports, read back from the journal, change nothing
        gateway.learn(reported_fact("t1", report.device_seq, report.state, T0 + 3), T0 + 3, live=True)
    assert gateway.stats["stood_aside"] == 0
    history_seq = own[-1].device_seq + 10**10
    gateway.learn(reported_fact("t1", history_seq, {"target_c": 17.5}, T0 - 3600), T0 + 3, live=True)
    assert reports(play(gateway, T0 + 3, T0 + 3 + aside - 1), "t1") == []
    after = reports(play(gateway, T0 + 3 + aside - 1, T0 + 3 + aside + 3), "t1")
    assert after and after[0].device_seq == history_seq + 1
    assert (
        after[-1].state.get("target_c", 17.5) == 17.5
        and gateway.players["t1"].model.state["target_c"] == 17.5
    )


def test_while_playing_only_registrations_and_other_writers_reports_are_decoded() -> None:
    gateway = fleet()
    gateway.learn(registered("t1", "thermostat"), T0)
    own_seq = gateway.players["t1"].seq
    assert gateway._worth_reading(b"t2", encode(registered("t2", "lock")))
    assert not gateway._worth_reading(b"t1", encode(reported_fact("t1", own_seq, {"target_c": 20.0}, T0)))
    assert gateway._worth_reading(b"t1", encode(reported_fact("t1", own_seq + 1, {"target_c": 20.0}, T0)))
    assert not gateway._worth_reading(b"t9", encode(reported_fact("t9", own_seq + 1, {"target_c": 20.0}, T0)))


def test_reordered_reports_arrive_newer_first_and_duplicates_twice() -> None:
    swapped = fleet(reorder_fraction=1.0)
    swapped.learn(registered("t1", "thermostat"), T0)
    seqs = [r.device_seq for r in reports(play(swapped, T0, T0 + 10), "t1")]
    assert len(seqs) >= 8
    assert all(seqs[i] == seqs[i + 1] + 1 for i in range(0, len(seqs) - 1, 2)), seqs

    doubled = fleet(duplicate_fraction=1.0)
    doubled.learn(registered("t1", "thermostat"), T0)
    sent = reports(play(doubled, T0, T0 + 10), "t1")
    assert len(sent) >= 16
    assert all(sent[i] == sent[i + 1] for i in range(0, len(sent), 2))


def test_a_command_is_acked_after_the_delay_and_its_effect_reported_at_once() -> None:
    gateway = fleet(ack_delay_s=2.0)
    gateway.learn(registered("l1", "lock"), T0)
    play(gateway, T0, T0 + 1)
    order = command("l1", "unlock", {})
    gateway.on_command(order, T0 + 1)

    soon = play(gateway, T0 + 1, T0 + 1.1)
    assert [r.state["lock_state"] for r in reports(soon, "l1")] == ["unlocking"]
    assert not [r for r in soon if isinstance(r, AcknowledgeCommand)], "the ack is slow"
    later = play(gateway, T0 + 1.1, T0 + 4)
    acks = [r for r in later if isinstance(r, AcknowledgeCommand)]
    assert [(a.command_id, a.ok) for a in acks] == [(order.command_id, True)]
    assert reports(later, "l1")[-1].state["lock_state"] == "unlocked"


def test_an_ack_due_at_once_carries_the_report_of_its_command() -> None:
    gateway = fleet()
    gateway.learn(registered("t1", "thermostat"), T0)
    play(gateway, T0, T0 + 1)
    order = command("t1", "set_target_temperature", {"target_c": 23.5})
    gateway.on_command(order, T0 + 1)

    sent = play(gateway, T0 + 1, T0 + 1.1)
    [ack_at] = [i for i, r in enumerate(sent) if isinstance(r, AcknowledgeCommand)]
    answer = sent[ack_at + 1]
    assert isinstance(answer, ReportState) and answer.state["target_c"] == 23.5
    assert [r for r in reports(sent, "t1") if "target_c" in r.state] == [answer], "said once, with the ack"
    later = reports(play(gateway, T0 + 1.1, T0 + 20), "t1")
    assert later and all(r.device_seq > answer.device_seq for r in later), "its seq is in the device's order"


def test_jammed_locks_nack_lost_acks_vanish_and_stale_commands_are_ignored() -> None:
    gateway = fleet(jam_probability=1.0)
    gateway.learn(registered("l1", "lock"), T0)
    order = command("l1", "unlock", {})
    gateway.on_command(order, T0)
    [ack] = [r for r in play(gateway, T0, T0 + 1) if isinstance(r, AcknowledgeCommand)]
    assert (ack.command_id, ack.ok, ack.reason) == (order.command_id, False, "device_jammed")

    gateway.on_command(command("l1", "lock", {}, expires_in_s=-1), T0 + 1)
    assert not [r for r in play(gateway, T0 + 1, T0 + 2) if isinstance(r, AcknowledgeCommand)]

    lossy = fleet(lost_ack_fraction=1.0)
    lossy.learn(registered("t1", "thermostat"), T0)
    lossy.on_command(command("t1", "set_target_temperature", {"target_c": 22.5}), T0)
    sent = play(lossy, T0, T0 + 2)
    assert not [r for r in sent if isinstance(r, AcknowledgeCommand)]
    assert reports(sent, "t1")[0].state["target_c"] == 22.5, "applied all the same"


def test_about_the_offline_fraction_of_devices_is_silent_and_deaf() -> None:
    gateway = fleet(rate=0.2, offline_fraction=0.5, offline_s=(20.0, 40.0), seed=9)
    for n in range(100):
        gateway.learn(registered(f"t{n}", "thermostat"), T0)
    silent_share = []
    for minute in range(1, 31):
        play(gateway, T0 + (minute - 1) * 60, T0 + minute * 60, every=1.0)
        now = T0 + minute * 60
        silent_share.append(sum(p.silent_until > now for p in gateway.players.values()) / 100)
    average = sum(silent_share[5:]) / len(silent_share[5:])
    assert 0.35 < average < 0.65, silent_share

    now = T0 + 30 * 60
    quiet = next(p for p in gateway.players.values() if p.silent_until > now + 1)
    gateway.on_command(command(quiet.device_id, "set_hvac_mode", {"mode": "off"}), now)
    assert gateway.stats["commands_unheard"] == 1
    assert not reports(play(gateway, now, now + 1, every=0.5), quiet.device_id)


def test_drifting_thermostats_are_chosen_by_id_or_share() -> None:
    by_id = fleet(drifting_ids=frozenset({"t2"}))
    every = fleet(drifting_fraction=1.0)
    for gateway in (by_id, every):
        for n in range(1, 4):
            gateway.learn(registered(f"t{n}", "thermostat"), T0)
    drifts = {d: p.model.drift_c_per_s != 0 for d, p in by_id.players.items()}  # type: ignore[attr-defined]
    assert drifts == {"t1": False, "t2": True, "t3": False}
    assert all(p.model.drift_c_per_s != 0 for p in every.players.values())  # type: ignore[attr-defined]


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEARTH_SIMULATOR_RATE", "0.5")
    monkeypatch.setenv("HEARTH_SIMULATOR_DRIFTING_IDS", "t1, t2")
    monkeypatch.setenv("HEARTH_TOPIC_PREFIX", "other")
    settings = SimulatorSettings()
    options = settings.fleet_options()
    assert (options.rate, options.drifting_ids) == (0.5, frozenset({"t1", "t2"}))
    assert settings.stack.topics.inbox == "other.inbox"


def test_the_demo_devices_have_stable_ids() -> None:
    bodies = fleet_devices("home-1", {"thermostat": 2, "lock": 1})
    assert [b["device_id"] for b in bodies] == ["home-1-thermostat-1", "home-1-thermostat-2", "home-1-lock-1"]
    assert bodies == fleet_devices("home-1", {"thermostat": 2, "lock": 1})
    assert {b["type"] for b in bodies} == {"thermostat", "lock"}


class _HubSeen:
    """What a hub was asked to act for (the parts of ``DeviceConnection`` the fleet's joining uses)."""

    def __init__(self) -> None:
        self.added: list[str] = []
        self.devices: list[str] = []

    def add_device(self, device_id: str) -> None:
        self.added.append(device_id)


async def test_the_hub_acts_for_a_device_only_on_the_followers_allowed() -> None:
    gateway = fleet()
    gateway.learn(registered("t1", "thermostat"), T0)
    hub = _HubSeen()
    gateway._hubs["0"] = hub  # type: ignore[assignment]
    on_allowed = gateway._on_allowed("0")  # shard 0's broker (t1 was registered on it)
    for payload in (b"", b"nope", b"allowed\x00"):  # a cleared retained message, or anything else
        await on_allowed("hearth/hubs/_hearth_simulator/devices/t1", payload)
    assert gateway.allowed == {"0": set()} and hub.added == []
    await on_allowed("hearth/hubs/_hearth_simulator/devices/unknown", b"allowed")
    assert hub.added == []  # allowed, but the journal never registered it: nobody plays it
    await on_allowed("hearth/hubs/_hearth_simulator/devices/t1", b"allowed")
    assert hub.added == ["t1"] and "t1" in gateway.allowed["0"]


async def test_a_device_is_played_through_its_shard_s_hub_and_follows_a_move() -> None:
    gateway = fleet()
    gateway.endpoints["1"] = gateway.endpoints["0"]
    gateway.allowed["1"] = set()
    hubs = {shard: _HubSeen() for shard in ("0", "1")}
    gateway._hubs = hubs  # type: ignore[assignment]
    gateway.learn(registered("t1", "thermostat", shard="1"), T0)
    for shard in ("0", "1"):  # every broker allows the simulator's devices; only its shard's hub plays it
        await gateway._on_allowed(shard)("hearth/hubs/_hearth_simulator/devices/t1", b"allowed")
    assert (hubs["0"].added, hubs["1"].added) == ([], ["t1"])
    gateway.learn(moved("t1", "0"), T0)
    hubs["1"].devices = ["t1"]  # (it acts for it on shard 1 already)
    gateway._join()
    assert hubs["0"].added == ["t1"]
