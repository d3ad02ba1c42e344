"""The campaign driver and the APIs' campaign feed restart from their snapshots, on a real broker, with the
heads of the journal and of the campaigns topic gone (as a passed retention window leaves them).

The driver runs in this process on the test's own topics (tests/integration/test_campaigns.py runs it as
a process of the shared platform, whose journal other tests still read). The devices' side is played by
the test: it reads the update commands the driver put on the inbox and writes the facts the device actor
would record for them (made by the real ``decide``/``stamp``/``evolve``, tests/support/device_journal.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from hearth_campaigns.entrypoints.driver import CampaignDriver
from hearth_campaigns.settings import CampaignSettings
from hearth_shared.adapters.campaign_feed import CampaignFeed, campaign_view
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain.campaign import Campaign
from hearth_shared.domain.campaign_decide import job_command_id
from hearth_shared.schema.campaign_events import (
    AbortThresholds,
    Firmware,
    StartCampaign,
    encode_campaign_record,
)
from hearth_shared.schema.events import SubmitCommand, decode_inbound, utcnow
from tests.support.device_journal import DeviceJournal
from tests.support.inbox_requests import ack_request, register_request, report_request
from tests.support.topics import pass_retention, produce, produce_facts, read_topic
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HOME = "h1"
LIMITS = AbortThresholds(max_failed_pct=50, max_offline_pct=50, max_anomaly_ratio=100)


def firmware(version: str) -> Firmware:
    return Firmware(
        device_type="lock", version=version, url=f"https://fw.example/{version}.bin", sha256="5e" * 32
    )


@asynccontextmanager
async def running(driver: CampaignDriver) -> AsyncIterator[CampaignDriver]:
    """The driver running until the block ends, then stopped cleanly (which saves its snapshot)."""
    stop = asyncio.Event()
    task = asyncio.create_task(driver.run(stop))
    try:
        await eventually(lambda: driver.ready.is_set() or task.done(), "the driver ready", timeout_s=60)
        if task.done():
            task.result()  # raises what stopped it
        yield driver
    finally:
        stop.set()
        await task


class Devices:
    """The test's locks: registered, reporting firmware 1.0.0; they install what the driver sends them."""

    def __init__(self, stack: StackSettings) -> None:
        self.stack = stack
        self.journal = DeviceJournal(start=utcnow(), home_id=HOME)
        self.seq: dict[str, int] = {}
        self.answered: set[uuid.UUID] = set()

    async def register(self, *device_ids: str) -> None:
        for device_id in device_ids:
            self.journal.send(device_id, register_request(device_id, home_id=HOME, device_type="lock"))
            self._report(device_id, firmware_version="1.0.0", lock_state="locked")
        await produce_facts(self.stack, self.journal.take())

    def _report(self, device_id: str, **state: Any) -> None:
        seq = self.seq[device_id] = self.seq.get(device_id, 0) + 1
        self.journal.send(device_id, report_request(device_id, seq, at=self.journal.now, **state))

    async def updates(self) -> list[SubmitCommand]:
        """Every ``update_firmware`` command the driver put on the inbox so far."""
        inbox = await read_topic(self.stack, self.stack.topics.command_lane, decode_inbound)
        return [r for r in inbox if isinstance(r, SubmitCommand) and r.name == "update_firmware"]

    async def install_what_was_sent(self) -> None:
        """Each update not answered yet: dispatched, acknowledged, the new version reported (converged)."""
        for command in await self.updates():
            if command.command_id in self.answered:
                continue
            self.answered.add(command.command_id)
            self.journal.send(command.device_id, command)
            self.journal.send(command.device_id, ack_request(command.device_id, command.command_id))
            self._report(command.device_id, firmware_version=command.params["version"])
        await produce_facts(self.stack, self.journal.take())


async def request_campaign(stack: StackSettings, version: str, **target: Any) -> str:
    """A ``start_campaign`` request on the campaign-requests topic, as the command API sends it."""
    campaign_id = uuid.uuid4()
    start = StartCampaign(
        request_id=uuid.uuid4(),
        sent_at=utcnow(),
        campaign_id=campaign_id,
        firmware=firmware(version),
        waves=(50, 100),
        soak_s=0,
        abort=LIMITS,
        job_timeout_s=600,
        **target,
    )
    value = encode_campaign_record(start)
    await produce(
        stack.kafka_bootstrap_servers, stack.topics.campaign_requests, [(str(campaign_id).encode(), value)]
    )
    return str(campaign_id)


async def test_the_driver_and_the_feed_restart_from_their_snapshots_with_the_heads_gone(
    broker_only: StackSettings,
) -> None:
    stack = broker_only
    settings = CampaignSettings(stack=stack, tick_s=0.1)
    devices = Devices(stack)
    ids = [f"lock-{i}" for i in range(4)]
    await devices.register(*ids)
    feed = CampaignFeed(stack)
    await feed.start()
    try:
        async with running(CampaignDriver(settings)) as driver:
            assert driver.follower.restart.started_from == "first offset (no snapshot yet)"
            first = await request_campaign(stack, "2.0.0", home_ids=(HOME,))

            async def completed() -> bool:
                await devices.install_what_was_sent()
                campaign = driver.campaigns.get(first)
                return campaign is not None and campaign.status == "completed"

            await eventually(
                completed, "the first campaign completed, wave by wave", timeout_s=90, every_s=0.5
            )
            done: Campaign = driver.campaigns[first]
            assert {j.state for j in done.jobs.values()} == {"succeeded"} and len(done.jobs) == 4
            assert {d.firmware_version for d in driver.fleet.devices.values()} == {"2.0.0"}
        await eventually(lambda: feed.campaigns.get(first) == done, "the feed showing the campaign completed")
        shown = campaign_view(feed.campaigns[first])
    finally:
        await feed.stop()  # saves the feed's snapshot

    # Retention passes over every fact there is: registrations, firmware reports, the campaign's story.
    await pass_retention(stack.kafka_bootstrap_servers, stack.topics.journal)
    await pass_retention(stack.kafka_bootstrap_servers, stack.topics.campaigns)

    feed = CampaignFeed(stack)
    await feed.start()
    try:
        await feed.follower.wait_caught_up()
        assert feed.follower.restart.started_from == "snapshot" and feed.follower.restart.gap == 0
        assert campaign_view(feed.campaigns[first]) == shown  # GET /v1/campaigns/{id} answers as before

        async with running(CampaignDriver(settings)) as driver:
            restart = driver.follower.restart
            assert (restart.started_from, restart.gap, restart.replayed) == ("snapshot", 0, 0)
            assert set(driver.fleet.devices) == set(ids)
            assert {d.firmware_version for d in driver.fleet.devices.values()} == {"2.0.0"}
            assert driver.campaigns[first] == done

            # A device registered just before a request is in that request's target: the driver waits
            # until the follower has read the journal to where it was when the request came.
            await devices.register("lock-new")
            second = await request_campaign(stack, "3.0.0", device_ids=(*ids, "lock-new"))
            await eventually(lambda: second in driver.campaigns, "the second campaign started", timeout_s=30)
            started = driver.campaigns[second]
            assert {d: j.previous_version for d, j in started.jobs.items()} == {
                **dict.fromkeys(ids, "2.0.0"),
                "lock-new": "1.0.0",
            }

            async def first_wave_sent() -> bool:
                jobs = driver.campaigns[second].jobs
                wave = {job_command_id(second, d) for d, j in jobs.items() if j.wave == 0}
                sent = {c.command_id for c in await devices.updates() if c.params["version"] == "3.0.0"}
                return bool(wave) and sent >= wave

            await eventually(first_wave_sent, "the second campaign's first wave on the inbox", every_s=0.5)
        await eventually(lambda: second in feed.campaigns, "the feed showing the second campaign")
    finally:
        await feed.stop()
