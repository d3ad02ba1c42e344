"""The campaign driver: runs firmware campaigns, one step at a time, each step a campaign fact.

Why a service of its own (not an agent in the device actor): a campaign spans thousands of devices and
the device actor's workers each own a share of the devices (their partitions); a campaign needs one view
of all of them and one writer of its own facts. The driver is that writer (one process; the supervisor
restarts it). It reads, and never writes, the device journal; it reaches devices only as the command API
does, with ``submit_command`` requests on the inbox, which the device actor decides like any other
command (so a quarantined device, an offline one, an expired deadline all behave as usual).

The loop: take requests (``campaign-requests``: register a firmware, start, abort), follow the journal
(``FleetView``), and every ``tick_s`` ``advance`` each campaign (hearth_shared.domain.campaign_decide).
Facts are recorded first (acks=all), then folded, then the device commands they name are submitted:

* a restart folds the campaigns topic and the journal again from their first offsets, then submits
  every command a fact named that the journal does not show (killed between the fact and the command);
  the command ids are derived from the campaign and the device, so a command submitted twice is one
  command (the actor drops a request for a command id it has);
* a request's offset is committed after its facts are recorded; a redelivered start or abort finds its
  campaign started or aborted already and changes nothing.

So a campaign survives a restart of any process halfway through a wave: the driver's (above), the actor's
(its facts are in the journal once), the gateway's or a device's (the job's timeout and the command's
deadline bound the wait). Not fenced: two drivers at once would both write; run one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition

from hearth_campaigns.fleet_view import FleetView
from hearth_campaigns.settings import CampaignSettings
from hearth_shared.campaign_events import (
    AbortCampaign,
    CampaignFact,
    Firmware,
    FirmwareRegistered,
    JobMoved,
    RegisterFirmware,
    RollbackSent,
    StartCampaign,
    decode_campaign_fact,
    decode_campaign_request,
    encode_campaign_record,
    firmware_key,
)
from hearth_shared.domain.campaign import Campaign, FirmwareCatalog, fold_campaign, register_firmware
from hearth_shared.domain.campaign_decide import (
    CampaignChange,
    CampaignRefused,
    abort,
    advance,
    stamp_campaign,
    start_campaign,
)
from hearth_shared.domain.campaign_gates import wave_health
from hearth_shared.events import MalformedRecord, SubmitCommand, fact_type, new_id, utcnow
from hearth_shared.kafka import KafkaJournal, topic_partitions
from hearth_shared.storable import decode_fact

log = logging.getLogger(__name__)

BATCH = 5000


class CampaignDriver:
    def __init__(self, settings: CampaignSettings, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.settings = settings
        self.topics = settings.stack.topics
        self.clock = clock
        self.campaigns: dict[str, Campaign] = {}
        self.catalog: FirmwareCatalog = {}
        self.fleet = FleetView()
        self.ready = asyncio.Event()
        self.out = KafkaJournal(
            settings.stack.kafka_bootstrap_servers, self.topics, client_id="hearth-campaigns"
        )

    async def run(self, stop: asyncio.Event) -> None:
        bootstrap = self.settings.stack.kafka_bootstrap_servers
        await self.out.start()
        journal = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        requests = AIOKafkaConsumer(
            self.topics.campaign_requests,
            bootstrap_servers=bootstrap,
            group_id=self.settings.consumer_group(),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            await journal.start()
            await self._replay_campaigns(bootstrap)
            await self._catch_up(journal)
            await self._resend()
            await requests.start()
            self.ready.set()
            log.info(
                "campaign driver: ready (%d campaigns, %d devices)",
                len(self.campaigns),
                len(self.fleet.devices),
            )
            while not stop.is_set():
                await self._follow(journal)
                batches = await requests.getmany(timeout_ms=int(self.settings.tick_s * 1000), max_records=100)
                if batches:  # a request sees every fact recorded before it was made (its target devices)
                    await self._read_to_end(journal)
                for records in batches.values():
                    for record in records:
                        await self._handle(record.value, record.offset)
                if batches:
                    await requests.commit()
                await self.tick()
        finally:
            with contextlib.suppress(Exception):
                await requests.stop()
            await journal.stop()
            await self.out.stop()

    # ------------------------------------------------------------------------------------ reading

    async def _replay_campaigns(self, bootstrap: str) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = await topic_partitions(consumer, self.topics.campaigns)
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            while await _behind(consumer, ends):
                for records in (await consumer.getmany(timeout_ms=500, max_records=BATCH)).values():
                    self._fold([decode_campaign_fact(record.value) for record in records])
        finally:
            await consumer.stop()

    async def _catch_up(self, journal: AIOKafkaConsumer) -> None:
        tps = await topic_partitions(journal, self.topics.journal)
        journal.assign(tps)
        await journal.seek_to_beginning(*tps)
        await self._read_to_end(journal)

    async def _read_to_end(self, journal: AIOKafkaConsumer) -> None:
        """Follow the journal up to its end offsets as they are now."""
        ends = await journal.end_offsets(list(journal.assignment()))
        while await _behind(journal, ends):
            await self._follow(journal, timeout_ms=500)

    async def _follow(self, journal: AIOKafkaConsumer, timeout_ms: int = 0) -> None:
        while True:
            batches = await journal.getmany(timeout_ms=timeout_ms, max_records=BATCH)
            for records in batches.values():
                for record in records:
                    value = record.value or b""
                    if not self.fleet.wants(fact_type(value), value):
                        continue
                    try:
                        self.fleet.apply(decode_fact(value))
                    except MalformedRecord:
                        continue  # the projector dead-letters it; the view goes on without it
            if sum(len(r) for r in batches.values()) < BATCH:
                return
            timeout_ms = 0

    def _fold(self, facts: list[CampaignFact]) -> None:
        by_campaign: dict[str, list[CampaignFact]] = {}
        for fact in facts:
            if isinstance(fact, FirmwareRegistered):
                register_firmware(self.catalog, fact)
            else:
                by_campaign.setdefault(fact.campaign_id, []).append(fact)
        for campaign_id, its in by_campaign.items():
            folded = fold_campaign(self.campaigns.get(campaign_id), its)
            assert folded is not None
            self.campaigns[campaign_id] = folded

    # ------------------------------------------------------------------------------------ deciding

    async def _handle(self, value: bytes | None, offset: int) -> None:
        try:
            request = decode_campaign_request(value)
        except MalformedRecord as bad:
            log.warning("skipping campaign request at offset %d: %s", offset, bad)
            return
        now = self.clock()
        if isinstance(request, RegisterFirmware):
            await self._register(request.firmware, now)
        elif isinstance(request, StartCampaign):
            await self._start(request, now)
        elif isinstance(request, AbortCampaign):
            campaign = self.campaigns.get(str(request.campaign_id))
            if campaign is not None:
                health = msgspec.to_builtins(wave_health(campaign, self.fleet.sight(), now))
                await self._record(campaign, abort(campaign, self.catalog, request.reason, health, now), now)

    async def _register(self, firmware: Firmware, now: datetime) -> None:
        if (firmware.device_type, firmware.version) in self.catalog:
            return
        fact = FirmwareRegistered(
            event_id=new_id(),
            campaign_id=firmware_key(firmware.device_type, firmware.version),
            version=1,
            occurred_at=now,
            recorded_at=now,
            firmware=firmware,
        )
        await self._append([fact])

    async def _start(self, request: StartCampaign, now: datetime) -> None:
        campaign_id = str(request.campaign_id)
        if campaign_id in self.campaigns:
            return
        await self._register(request.firmware, now)
        try:
            started = start_campaign(request, self.fleet.sight())
        except CampaignRefused as refused:
            log.warning("campaign %s not started: %s", campaign_id, refused)
            return
        await self._append(stamp_campaign(None, [started], now=now, campaign_id=campaign_id))
        log.info("campaign %s started", campaign_id)

    async def tick(self) -> None:
        """Advance every campaign that has something left to do."""
        now, sight = self.clock(), None
        for campaign in list(self.campaigns.values()):
            if campaign.status == "completed":
                continue
            sight = sight or self.fleet.sight()
            await self._record(campaign, advance(campaign, self.catalog, sight, now), now)

    async def _record(self, campaign: Campaign, changes: list[CampaignChange], now: datetime) -> None:
        if changes:
            await self._append(stamp_campaign(campaign, changes, now=now))

    async def _append(self, facts: list[CampaignFact]) -> None:
        """Record facts (the broker has them before anything acts on them), fold them, then send the
        device commands they name."""
        producer = self.out.producer
        futures = [
            await producer.send(self.topics.campaigns, encode_campaign_record(f), key=f.campaign_id.encode())
            for f in facts
        ]
        await asyncio.gather(*futures)
        self._fold(facts)
        for fact in facts:
            await self._command_for(fact)

    # ------------------------------------------------------------------------------------ commanding

    async def _command_for(self, fact: CampaignFact, *, unseen_only: bool = False) -> None:
        campaign = self.campaigns.get(fact.campaign_id)
        if campaign is None:
            return
        if isinstance(fact, JobMoved) and fact.state == "sent" and fact.command_id is not None:
            firmware, command_id, device_id = campaign.firmware, fact.command_id, fact.device_id
        elif isinstance(fact, RollbackSent):
            back = self.catalog.get((campaign.firmware.device_type, fact.to_version))
            if back is None:
                return
            firmware, command_id, device_id = back, fact.command_id, fact.device_id
        else:
            return
        if unseen_only and command_id in self.fleet.admin_commands:
            return
        device = self.fleet.devices.get(device_id)
        if device is None:
            return
        await self.out.submit(
            SubmitCommand(
                request_id=new_id(),
                device_id=device_id,
                sent_at=self.clock(),
                home_id=device.home_id,
                command_id=command_id,
                name="update_firmware",
                params={"version": firmware.version, "url": firmware.url, "sha256": firmware.sha256},
                expires_at=fact.occurred_at + timedelta(seconds=campaign.job_timeout_s),
            )
        )

    async def _resend(self) -> None:
        """After a restart: submit each command a fact named that the journal does not show."""
        for campaign in self.campaigns.values():
            for job in campaign.jobs.values():
                at = job.changed_at or campaign.started_at
                if job.state == "sent" and job.command_id is not None:
                    moved = JobMoved(
                        event_id=new_id(), campaign_id=campaign.campaign_id, version=0, occurred_at=at,
                        recorded_at=at, device_id=job.device_id, state="sent", command_id=job.command_id,
                    )  # fmt: skip
                    await self._command_for(moved, unseen_only=True)
                if job.rollback_command_id is not None and not job.rollback_ended and job.rollback_to:
                    back = RollbackSent(
                        event_id=new_id(), campaign_id=campaign.campaign_id, version=0, occurred_at=at,
                        recorded_at=at, device_id=job.device_id, command_id=job.rollback_command_id,
                        to_version=job.rollback_to,
                    )  # fmt: skip
                    await self._command_for(back, unseen_only=True)


async def _behind(consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
    """Whether the consumer has not read up to ``ends`` yet."""
    for tp, end in ends.items():
        if await consumer.position(tp) < end:
            return True
    return False


def make_app(settings: CampaignSettings, *, clock: Callable[[], datetime] = utcnow) -> CampaignDriver:
    """The driver, not connected yet (``await driver.run(stop)`` connects and drives)."""
    return CampaignDriver(settings, clock=clock)


__all__ = ["CampaignDriver", "make_app"]
