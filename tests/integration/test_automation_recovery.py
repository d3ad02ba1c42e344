"""Automations acting on their own on the real stack, with simulated devices played over MQTT: a drifting
thermostat is set to safe mode by the home's corrective automation and one signed webhook arrives; the
automations process killed with -9 between a trigger and its action (a state held ``for_s``, a fact
journaled while it was down) and between a run's command and its run fact (the command on the inbox,
the run fact not in the home journal: what a kill between a flush's two writes leaves) acts exactly once
after a restart, and not again after another; a command action for a quarantined device is not sent
and the run says why."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from hearth_automations.service.defaults import default_id
from hearth_devstack.local import Services
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.adapters.kafka import KafkaWriter, partition_of
from hearth_shared.domain.automation import action_id, fact_names, run_id
from hearth_shared.schema.events import CommandRequested, Event, SubmitCommand, utcnow
from tests.support.automations import automation_listed, receiving, runs, signed_by
from tests.support.home_fleet import playing, simulator_endpoint
from tests.support.platform import Platform
from tests.support.registration import register_device
from tests.support.topics import read_journal
from tests.support.waiting import eventually, poll_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

SECRET = "the-recovery-test-webhook-secret"
DRIFT_C_PER_H = 3600.0  # 1 degC/s: out of the default model's band (21 +- 12 degC) in seconds
POLL_S = 0.5


async def reported(query: httpx.AsyncClient, device_id: str, key: str) -> Any:
    response = await query.get(f"/v1/devices/{device_id}")
    return response.json().get("reported", {}).get(key) if response.status_code == 200 else None


async def anomalies(query: httpx.AsyncClient, device_id: str) -> int:
    response = await query.get(
        f"/v1/devices/{device_id}/events", params={"type": "anomaly.detected", "limit": 1000}
    )
    return len(response.json().get("items", [])) if response.status_code == 200 else 0


async def more_anomalies(query: httpx.AsyncClient, device_id: str, at_least: int) -> bool:
    return await anomalies(query, device_id) >= at_least


async def heating(
    api: httpx.AsyncClient, query: httpx.AsyncClient, devices: list[str], fleet: asyncio.Task[None]
) -> None:
    """Set each simulated thermostat to heat, and wait until each reports it."""
    for device_id in devices:
        sent = await api.post(
            f"/v1/devices/{device_id}/commands", json={"name": "set_hvac_mode", "params": {"mode": "heat"}}
        )
        assert sent.status_code == 202, sent.text

    async def all_heating() -> bool:
        assert not fleet.done(), "the fleet stopped"
        return all([await reported_is(query, d, "hvac_mode", "heat") for d in devices])

    await eventually(all_heating, "the thermostats reporting hvac_mode heat", timeout_s=90, every_s=POLL_S)


async def test_a_drifting_thermostat_is_set_to_safe_mode_and_one_signed_webhook_arrives(
    platform: Platform,
    mosquitto: MosquittoBroker,
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    home: str,
) -> None:
    with receiving() as receiver:
        answer = await api.put(
            f"/v1/homes/{home}/notifications", json={"webhook_url": receiver.url, "secret": SECRET}
        )
        assert answer.status_code == 200, answer.text
        thermostat = await register_device(api, home, "thermostat", simulated=True)
        safe_mode = str(default_id(home, "anomalous-thermostat"))
        await eventually(
            lambda: automation_listed(query, safe_mode), "the home's corrective automations", timeout_s=60
        )
        drifting = frozenset({thermostat})
        mqtt = simulator_endpoint(mosquitto)
        async with playing(
            platform, {thermostat}, mqtt, rate=2, drifting_ids=drifting, drift_c_per_h=DRIFT_C_PER_H
        ) as fleet:
            # The simulator draws its mode (maybe off already, when the safe mode has nothing to do).
            await heating(api, query, [thermostat], fleet)

            async def safe() -> bool:
                assert not fleet.done(), "the fleet stopped"
                return await reported_is(query, thermostat, "hvac_mode", "off")

            await eventually(
                safe, "the drifting thermostat in safe mode (hvac_mode off)", timeout_s=120, every_s=POLL_S
            )
            await eventually(lambda: len(receiver.received) >= 1, "the webhook", timeout_s=60, every_s=POLL_S)
            # The sensor drifts on and every reading is anomalous: no second action, no second webhook.
            seen = await anomalies(query, thermostat)
            await eventually(
                lambda: more_anomalies(query, thermostat, seen + 4),
                "more anomalies after the safe mode",
                timeout_s=60,
                every_s=POLL_S,
            )
            assert len(receiver.received) == 1, [body for _, body in receiver.received]
            found = (await runs(query, safe_mode))["runs"]
            fired = [r for r in found if r["fired"]]
            assert len(fired) == 1, found
            command, notify = fired[0]["actions"]
            assert (command["device_id"], command["name"], command["status"]) == (
                thermostat,
                "set_hvac_mode",
                "converged",
            )
            headers, body = receiver.received[0]
            assert signed_by(SECRET, headers, body)
            content = json.loads(body)
            assert content["automation_id"] == safe_mode and content["trigger"]["type"] == "anomaly.detected"
            assert content["trigger"]["device_id"] == thermostat
            assert headers["x-hearth-notification-id"] == content["notification_id"] == notify["action_id"]


def kill(platform: Platform) -> datetime:
    """The automations process killed with -9 (no goodbye); when."""
    victim = platform.parts["automations"]
    assert victim.pid is not None
    os.killpg(victim.pid, signal.SIGKILL)
    victim.kill_leftovers()
    return datetime.now(UTC)


def restart(platform: Platform, base: Path) -> None:
    """A new automations process; healthy once it replayed both journals from their starts (live)."""
    for where in (base / "logs", base / "data"):  # the heartbeat file goes in data
        where.mkdir(parents=True, exist_ok=True)
    services = Services(platform.settings, logs=base / "logs", data=base / "data")
    part, timeout_s = services.part("automations")
    platform.parts["automations"] = part  # the session's from now on (stopped with the others)
    part.start()
    part.wait_healthy(timeout_s * 2)


async def create(api: httpx.AsyncClient, query: httpx.AsyncClient, body: dict[str, Any]) -> str:
    answer = await api.post("/v1/automations", json=body)
    assert answer.status_code == 201, answer.text
    automation_id: str = answer.json()["automation_id"]
    await eventually(lambda: automation_listed(query, automation_id), "the automation", timeout_s=30)
    return automation_id


async def test_killed_between_trigger_and_action_it_acts_once_after_a_restart_and_never_twice(
    platform: Platform,
    mosquitto: MosquittoBroker,
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    home: str,
    tmp_path: Path,
) -> None:
    watched = await register_device(api, home, "thermostat", "watched", simulated=True)
    follower = await register_device(api, home, "thermostat", "follower", simulated=True)
    async with playing(platform, {watched, follower}, simulator_endpoint(mosquitto), rate=1) as fleet:
        await heating(api, query, [watched, follower], fleet)  # the simulator draws each one's mode
        held = await create(api, query, {
            "home_id": home, "name": "cooling for a while",
            "trigger": {"state": {"device_id": watched, "key": "hvac_mode", "equals": "cool", "for_s": 12}},
            "actions": [{"command": {"device_id": follower, "name": "set_target_temperature",
                                     "params": {"target_c": 23.5}}}],
        })  # fmt: skip
        on_fact = await create(api, query, {
            "home_id": home, "name": "follow a new target",
            "trigger": {"fact": "thermostat.target_set", "device_id": watched},
            "actions": [
                {"command": {"device_id": follower, "name": "set_hvac_mode", "params": {"mode": "cool"}}}
            ],
        })  # fmt: skip
        sent = await api.post(
            f"/v1/devices/{watched}/commands", json={"name": "set_hvac_mode", "params": {"mode": "cool"}}
        )
        assert sent.status_code == 202, sent.text
        await eventually(
            lambda: reported_is(query, watched, "hvac_mode", "cool"), "the edge", timeout_s=30, every_s=0.1
        )
        # The timer (12 s) is pending: killed now, between the trigger and its action.
        killed_at = kill(platform)
        assert (await runs(query, held))["runs"] == [], "killed too late: the timer had fired"
        # While it is down, a fact triggers the other automation: journaled, not yet acted on.
        sent = await api.post(
            f"/v1/devices/{watched}/commands",
            json={"name": "set_target_temperature", "params": {"target_c": 22}},
        )
        assert sent.status_code == 202, sent.text
        # ... and its command reached the inbox, its run fact did not: killed between the two.
        sent_before_the_kill = await command_sent_before_its_run_fact(platform, on_fact, watched, follower)
        restart(platform, tmp_path / "first")

        async def both_runs() -> list[list[dict[str, Any]]]:
            return [(await runs(query, a))["runs"] for a in (held, on_fact)]

        await poll_until(
            both_runs,
            lambda found: all(len(r) == 1 and r[0]["actions"][0]["status"] == "converged" for r in found),
            "each automation's one run, its command converged",
            timeout_s=90,
            every_s=POLL_S,
        )
        run = (await runs(query, held))["runs"][0]
        assert run["fired"] and datetime.fromisoformat(run["trigger"]["due_at"]) > killed_at
        assert await reported(query, follower, "target_c") == 23.5
        assert await reported(query, follower, "hvac_mode") == "cool"

        kill(platform)  # and once more: live again, it does nothing twice
        restart(platform, tmp_path / "second")
        await asyncio.sleep(3)  # a few ticks
        journal = await read_journal(platform.settings)
        commands = Counter(
            (e.payload.command_id, e.payload.name)
            for e in journal
            if isinstance(e, CommandRequested) and e.device_id == follower
        )
        acted = [(await runs(query, a))["runs"][0]["actions"][0] for a in (held, on_fact)]
        # the automations' two commands once each (and the test's own set_hvac_mode heat, before)
        assert sorted(commands.values()) == [1, 1, 1], commands
        assert {(uuid.UUID(a["action_id"]), a["name"]) for a in acted} <= set(commands), (acted, commands)
        assert uuid.UUID(acted[1]["action_id"]) == sent_before_the_kill  # sent again, recorded once
        assert [len((await runs(query, a))["runs"]) for a in (held, on_fact)] == [1, 1]


async def command_sent_before_its_run_fact(
    platform: Platform, automation_id: str, watched: str, follower: str
) -> uuid.UUID:
    """The command the engine sends for the watched thermostat's latest fact its ``thermostat.target_set``
    trigger matches (a ``device.desired_set`` of its target; its id derived from the automation and that
    fact), put on the inbox as the engine would have."""

    async def target_set() -> list[Event]:
        journal = await read_journal(platform.settings)
        return [e for e in journal if e.device_id == watched and "thermostat.target_set" in fact_names(e)]

    facts = await poll_until(target_set, bool, "the thermostat.target_set fact", timeout_s=30, every_s=POLL_S)
    command_id = action_id(run_id(uuid.UUID(automation_id), facts[-1].event_id), 0)
    now = utcnow()
    request = SubmitCommand(
        request_id=command_id, device_id=follower, sent_at=now, home_id=facts[-1].home_id,
        command_id=command_id, name="set_hvac_mode", params={"mode": "cool"},
        expires_at=now + timedelta(minutes=5),
    )  # fmt: skip
    writer = KafkaWriter(platform.settings.kafka_bootstrap_servers, platform.settings.topics, "test-kill")
    await writer.start()
    try:
        await writer.send_requests(request)
    finally:
        await writer.stop()
    return command_id


async def reported_is(query: httpx.AsyncClient, device_id: str, key: str, value: Any) -> bool:
    return bool(await reported(query, device_id, key) == value)


async def test_a_command_for_a_quarantined_device_is_not_sent_and_the_run_says_why(
    api: httpx.AsyncClient, admin_api: httpx.AsyncClient, query: httpx.AsyncClient, home: str
) -> None:
    held = await register_device(api, home, "thermostat", "quarantined")
    # The watched thermostat's facts share the quarantined one's journal partition, so the engine reads
    # the quarantine before the trigger (it reads a partition in order, partitions not in step: across
    # two, a trigger could come first; the command would then go out and the device actor reject it, the
    # run saying ``rejected``, as it did once).
    watched = next(
        f"thermostat-watched-{home}-{n}"
        for n in itertools.count()
        if partition_of(f"thermostat-watched-{home}-{n}".encode()) == partition_of(held.encode())
    )
    body = {"device_id": watched, "home_id": home, "type": "thermostat", "name": "watched"}
    assert (await admin_api.post("/v1/devices", json=body)).status_code == 201
    answer = await admin_api.post(f"/v1/devices/{held}/quarantine", json={"reason": "suspect firmware"})
    assert answer.status_code == 202, answer.text
    await eventually(
        lambda: quarantined(query, held), "the quarantine in the twin", timeout_s=30, every_s=POLL_S
    )
    automation_id = await create(api, query, {
        "home_id": home, "name": "follow",
        "trigger": {"fact": "thermostat.target_set", "device_id": watched},
        "actions": [{"command": {"device_id": held, "name": "set_hvac_mode", "params": {"mode": "off"}}},
                    {"notify": {"message": "the watched thermostat changed"}}],
    })  # fmt: skip
    sent = await api.post(
        f"/v1/devices/{watched}/commands", json={"name": "set_target_temperature", "params": {"target_c": 20}}
    )
    assert sent.status_code == 202, sent.text

    async def ran() -> bool:
        return len((await runs(query, automation_id))["runs"]) == 1

    await eventually(ran, "the run", timeout_s=30, every_s=POLL_S)
    run = (await runs(query, automation_id))["runs"][0]
    command, notify = run["actions"]
    assert run["fired"] and notify["kind"] == "notify"
    assert (command["status"], command["skipped"], command["detail"]) == (
        "skipped",
        "quarantined",
        "suspect firmware",
    )
    events = (await query.get(f"/v1/devices/{held}/events", params={"limit": 1000})).json()["items"]
    assert not [e for e in events if e["type"] == "command.requested"], events


async def quarantined(query: httpx.AsyncClient, device_id: str) -> bool:
    response = await query.get(f"/v1/devices/{device_id}")
    return response.status_code == 200 and response.json().get("quarantine") is not None
