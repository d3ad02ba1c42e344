"""A retention window passes over everything, then every part is killed with -9 and restarted: nothing
registered, issued, revoked or configured before the window is forgotten.

Before the window: a thermostat with credentials (a real MQTT device that acknowledges and reports what it
is asked), a second one that stays offline, a home time zone, a schedule, an automation (the first
thermostat's target changes -> the second is set to heat), a firmware campaign over the second, and a
revoked home token. Once every part's snapshot covers the journals' end offsets (snapshots every second
here, ``HEARTH_SNAPSHOT_EVERY_S``), every record of the device journal and the home journal is deleted
(Kafka's DeleteRecords: what a passed retention window does), and each part is killed with -9 in turn and
waited for until the supervisor has it healthy again. Then: the thermostat connects with its password
(broker access rebuilt its files from its snapshot), a command to it converges (the command API and the
actor know it), the query API reads its twin and schedule, the automation fires again, the campaign shows
its status, and the revoked token stays refused on both APIs. The journal's archive (the Spark archive job,
run once before the window, and checked as ``hearth archive verify`` does) keeps the head for the views:
``hearth verify`` from the journal alone is refused (it would replay a history with a hole), from the
archive and the journal's tail it finds the live views equal, and ``rebuild --from-archive`` swaps in the
same views.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from hearth.groups.archive_cli import inspect_archive
from hearth_analytics.archive_files.archive_table import journal_ranges
from hearth_analytics.jobs.archive import start_archive
from hearth_analytics.settings import AnalyticsSettings
from hearth_device import DeviceConnection
from hearth_devstack.local import LocalStack
from hearth_read_models.rebuild.run import RebuildFailed, rebuild, verify
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.adapters.http_calls import GatedClient
from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.auth import create_token, token_id
from tests.chaos.conftest import supervised
from tests.support.automations import automation_listed, runs
from tests.support.campaigns import start_recorded_campaign
from tests.support.mqtt_devices import connected
from tests.support.part_kills import killed_and_back
from tests.support.topics import pass_retention, snapshot_manifests
from tests.support.waiting import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(900)]

HOME = "kept"
KILLED = [
    "broker-access",
    "device-actor",
    "device-gateway",
    "projector",
    "command-api",
    "query-api",
    "automations",
    "campaigns",
]
SHA = "0" * 64
# Every fold that must outlive the window (hearth_shared.adapters.topic_follower snapshot names).
FOLDS = {"command-api-registry", "query-api-homes", "automations-0-of-1", "campaign-driver", "campaign-feed"}
BROKER_ACCESS = "broker-access-"  # + the broker's platform listener


@pytest.fixture(scope="module")
def retention_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with supervised(tmp_path_factory.mktemp("retention"), {"HEARTH_SNAPSHOT_EVERY_S": "1"}) as stack:
        yield stack


async def play(device: DeviceConnection) -> None:
    """Acknowledge each command and report what it asked (a thermostat's target)."""
    while True:
        dispatched = await device.next_command(timeout_s=3600)
        await device.ack(dispatched)
        await device.report({"hvac_action": "heating", **dispatched.params})


async def end_offsets(settings: StackSettings, topic: str) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers)
    await consumer.start()
    try:
        partitions = await topic_partitions(consumer, topic)
        return {tp.partition: end for tp, end in (await consumer.end_offsets(partitions)).items()}
    finally:
        await consumer.stop()


async def snapshots_cover(settings: StackSettings, topics: list[str]) -> dict[str, dict[int, int]]:
    """Until every fold of ``FOLDS`` has a snapshot, and every snapshot that follows one of ``topics``
    reaches the end offsets those have now; returns those ends (the window passes over them, not over a
    fact written since, which a snapshot may not hold yet)."""
    ends = {topic: await end_offsets(settings, topic) for topic in topics}

    async def covered() -> bool:
        manifests = await snapshot_manifests(settings)
        behind = [
            name
            for name, manifest in manifests.items()
            for topic, partitions in manifest.positions.items()
            if topic in ends and any(partitions.get(p, 0) < end for p, end in ends[topic].items())
        ]
        return not behind and manifests.keys() >= FOLDS

    await eventually(covered, f"snapshots of {sorted(FOLDS)} reaching the ends of {topics}", timeout_s=60)
    return ends


async def archive_once(spark: Any, settings: StackSettings, where: Path) -> Path:
    """The Spark archive job, once, over the journal so far; checked as ``hearth archive verify`` does."""
    table = where / "archive"
    archiving = AnalyticsSettings(stack=settings, checkpoint_dir=where / "checkpoint", archive_url=str(table))
    await asyncio.to_thread(lambda: start_archive(spark, archiving, once=True).awaitTermination())
    report = inspect_archive(table, await journal_ranges(settings))
    assert not report.check.problems(), report.check.problems()
    return table


async def test_with_the_journals_head_gone_every_part_restarts_and_forgets_nothing(
    retention_stack: LocalStack, spark: Any, tmp_path: Path
) -> None:
    stack = retention_stack
    settings = stack.settings
    admin = {"Authorization": f"Bearer {create_token(settings.token_secret, admin=True)}"}
    household = {"Authorization": f"Bearer {create_token(settings.token_secret, home_id=HOME)}"}
    revoked = create_token(settings.token_secret, home_id=HOME)
    command_api, query_api = (
        f"http://127.0.0.1:{p}" for p in (stack.ports.command_api, stack.ports.query_api)
    )
    async with (
        GatedClient(base_url=command_api, headers=admin, timeout=30) as api,
        GatedClient(base_url=query_api, headers=household, timeout=30) as query,
    ):
        # ---- before the window
        passwords = {}
        for device_id in ("kept-thermostat", "kept-follower"):
            body = {"device_id": device_id, "home_id": HOME, "type": "thermostat", "name": device_id}
            response = await api.post("/v1/devices", json=body)
            assert response.status_code == 201, response.text
            passwords[device_id] = response.json()["credentials"]["password"]
        device = await connected(stack.mosquitto, "kept-thermostat", passwords["kept-thermostat"], 60.0)
        await device.report({"ambient_c": 19.0, "hvac_mode": "heat", "hvac_action": "idle", "target_c": 19.0})
        player = asyncio.create_task(play(device))
        assert (await api.put(f"/v1/homes/{HOME}", json={"timezone": "Europe/Berlin"})).status_code == 200
        program = [{"days": ["mon"], "at": "06:30", "command": {"name": "set_target_temperature",
                                                                 "params": {"target_c": 21.0}}}]  # fmt: skip
        response = await api.put("/v1/devices/kept-follower/schedule", json={"program": program})
        assert response.status_code == 200, response.text
        automation = {
            "home_id": HOME,
            "name": "the follower heats when the thermostat's target changes",
            "trigger": {"fact": "thermostat.target_set", "device_id": "kept-thermostat"},
            "actions": [{"command": {"device_id": "kept-follower", "name": "set_hvac_mode",
                                     "params": {"mode": "heat"}}}],
        }  # fmt: skip
        response = await api.post("/v1/automations", json=automation)
        assert response.status_code == 201, response.text
        automation_id = response.json()["automation_id"]
        await eventually(
            lambda: automation_listed(query, automation_id), "the automation listed", timeout_s=30
        )
        for version in ("1.0.0", "2.0.0"):
            firmware = {"device_type": "thermostat", "version": version, "url": f"https://fw.example/{version}",
                        "sha256": SHA}  # fmt: skip
            assert (await api.post("/v1/firmware", json=firmware)).status_code == 202
        campaign_id = await start_recorded_campaign(
            api,
            {
                "device_type": "thermostat", "version": "2.0.0", "url": "https://fw.example/2.0.0",
                "sha256": SHA, "target": {"device_ids": ["kept-follower"]}, "waves": [100], "soak_s": 1,
                "abort": {"max_failed_pct": 100, "max_offline_pct": 100, "max_anomaly_ratio": 100},
                "job_timeout_s": 5,
            },
        )  # fmt: skip
        assert (await api.delete(f"/v1/tokens/{token_id(revoked)}")).status_code in (200, 204)
        set_target = {"name": "set_target_temperature", "params": {"target_c": 20.5}}
        answer = await api.post(
            "/v1/devices/kept-thermostat/commands?wait=converged&timeout_s=20", json=set_target
        )
        assert answer.json()["status"] == "converged", answer.text
        await eventually(lambda: _runs(query, automation_id, 1), "the automation's first run", timeout_s=30)

        # ---- the window passes over all of it, then every part is killed and comes back
        topics = settings.topics
        covered = await snapshots_cover(settings, [topics.journal, topics.home_journal])
        archive = await archive_once(spark, settings, tmp_path)  # read after: it reaches those ends
        for topic in (topics.journal, topics.home_journal):
            await pass_retention(settings.kafka_bootstrap_servers, topic, covered[topic])
        player.cancel()
        await device.close(offline=False)
        for name in KILLED:
            await killed_and_back(stack, name)

        # ---- nothing before the window is forgotten
        device = await connected(stack.mosquitto, "kept-thermostat", passwords["kept-thermostat"], 60.0)
        player = asyncio.create_task(play(device))
        try:
            set_target["params"] = {"target_c": 22.0}
            answer = await api.post(
                "/v1/devices/kept-thermostat/commands?wait=converged&timeout_s=30", json=set_target
            )
            assert answer.status_code == 202 or answer.status_code == 200, answer.text
            assert answer.json()["status"] == "converged", answer.text

            async def twin_converged() -> bool:  # the view holds it a moment after the command API said so
                twin = (await query.get("/v1/devices/kept-thermostat")).json()
                return bool(twin["home_id"] == HOME and twin["reported"]["target_c"] == 22.0)

            await eventually(twin_converged, "the twin's new target in the query API", timeout_s=30)
            schedule = (await query.get("/v1/devices/kept-follower/schedule")).json()
            assert schedule["program"] == program and schedule["next"], schedule
            await eventually(
                lambda: _runs(query, automation_id, 2), "the automation's run after", timeout_s=30
            )
            campaign = (await api.get(f"/v1/campaigns/{campaign_id}")).json()
            assert campaign["status"] in ("running", "completed", "aborted"), campaign
            by_revoked = {"Authorization": f"Bearer {revoked}"}
            refused = await api.post(
                "/v1/devices/kept-thermostat/commands", json=set_target, headers=by_revoked
            )
            assert refused.status_code == 401, refused.text
            refused = await query.get("/v1/devices", params={"home_id": HOME}, headers=by_revoked)
            assert refused.status_code == 401, refused.text
        finally:
            player.cancel()
            await device.close(offline=False)

    # ---- the views: from the journal alone a replay would lack the head, so it is refused; from the
    # archive and the journal's tail it equals them, and a rebuild from there swaps in the same
    views = ReadModelSettings(stack=settings)
    with pytest.raises(RebuildFailed, match="no longer holds its whole history"):
        await verify(views, processes=1)
    with pytest.raises(RebuildFailed, match="no longer holds its whole history"):
        await rebuild(views, processes=1)
    verified = await verify(views, processes=1, archive=archive)
    assert verified.counts == dict.fromkeys(verified.counts, 0), verified.differences
    rebuilt = await rebuild(views, processes=1, archive=archive)
    assert rebuilt.swapped and all(c.ok for c in rebuilt.checks), rebuilt.checks
    assert 0 < rebuilt.from_archive < rebuilt.events  # the head from the archive, the tail from Kafka
    verified = await verify(views, processes=1, archive=archive)
    assert verified.counts == dict.fromkeys(verified.counts, 0), verified.differences


async def _runs(query: GatedClient, automation_id: str, count: int) -> bool:
    return len((await runs(query, automation_id))["runs"]) >= count
