"""The campaign driver: runs firmware campaigns, one step at a time, each step a campaign fact.

Why a service of its own (not an agent in the device actor): a campaign spans thousands of devices and
the device actor's workers each own a share of the devices (their partitions); a campaign needs one view
of all of them and one writer of its own facts. The driver is that writer (one process; the supervisor
restarts it). It reads, and never writes, the device journal; it reaches devices only as the command API
does, with ``submit_command`` requests on the inbox, which the device actor decides like any other
command (so a quarantined device, an offline one, an expired deadline all behave as usual).

What it knows: the campaigns topic folded (``CampaignBook``: each campaign and the firmware catalog) and
the journal folded (``FleetView``), both read by one ``TopicFollower`` and kept together in one snapshot
(``SnapshotPolicy`` named ``campaign-driver``, on the compacted snapshots topic: saved every minute or
500,000 records and at a clean stop). Why one snapshot of both, with both topics' positions: a restart
then finds campaigns and fleet as of one moment, reads only what came after it on either topic, and
``_resend`` compares a campaign's commands with the journal at that same moment; with a retention window
passed, the snapshot is what still knows the fleet's devices (their type, home, firmware) and every
campaign. The driver folds its own facts as it records them and reads them back through the follower;
folding is idempotent (a fact at or below its campaign's version changes nothing), so a snapshot whose
campaigns are ahead of the campaigns topic's saved position only reads those facts again. A clean stop
first waits (up to 5 s) until its own facts were read back, so the snapshot it saves is exactly at the
topics' ends and a restart reads nothing again.

The loop: take requests (``campaign-requests``: register a firmware, start, abort), and every ``tick_s``
``advance`` each campaign (hearth_shared.domain.campaign_decide), while the follower folds both topics in
its own task. Facts are recorded first (acks=all), then folded, then the device commands they name are
submitted:

* a request sees every fact recorded before it was made: when requests arrive, the driver takes the
  journal's end offsets and waits until the follower has handed over every record below them (the
  journal is neither compacted nor transactional, so each offset below its end is a record);
* a restart restores the snapshot, reads both topics from its positions to their ends, then submits
  every command a running campaign's fact named that the journal does not show (killed between the
  fact and the command), and each rollback not ended that the journal does not show; the command ids
  are derived from the campaign and the device, so a command submitted twice is one command (the actor
  drops a request for a command id it has);
* a request's offset is committed after its facts are recorded; a redelivered start or abort finds its
  campaign started or aborted already and changes nothing.

So a campaign survives a restart of any process halfway through a wave: the driver's (above), the actor's
(its facts are in the journal once), the gateway's or a device's (the job's timeout and the command's
deadline bound the wait). Not fenced: two drivers at once would both write; run one.

Memory is bounded by the fleet and the campaigns, not by the journal's age: the fleet view keeps per
device only the evidence the campaigns under way may read (``evidence_since``, every ``FORGET_EVERY``)
and only the admin commands a campaign still follows (``awaited_commands``, every tick; see
service/fleet_view.py); nothing else accumulates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

import msgspec
from aiokafka import AIOKafkaConsumer

from hearth_campaigns.service.fleet_view import FleetView
from hearth_campaigns.settings import CampaignSettings
from hearth_shared.adapters.kafka import KafkaWriter, topic_partitions
from hearth_shared.adapters.snapshots import SnapshotStore
from hearth_shared.adapters.topic_follower import TopicFollower, snapshot_policy
from hearth_shared.domain.campaign import Campaign, FirmwareCatalog
from hearth_shared.domain.campaign_book import CampaignBook
from hearth_shared.domain.campaign_decide import (
    CampaignChange,
    CampaignRefused,
    abort,
    advance,
    awaited_commands,
    evidence_since,
    stamp_campaign,
    start_campaign,
)
from hearth_shared.domain.campaign_gates import wave_health
from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.campaign_events import (
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
from hearth_shared.schema.events import MalformedRecord, SubmitCommand, fact_type, new_id, utcnow
from hearth_shared.schema.snapshot_format import SnapshotCodec

log = logging.getLogger(__name__)

SNAPSHOT_NAME = "campaign-driver"
DRIVER_INSTANCE = "campaign-driver"  # its consumer's group.instance.id
FORGET_EVERY = timedelta(minutes=1)  # how often the fleet view drops evidence no gate will read
DRIVER_SNAPSHOT_FORMAT = 1


class CampaignDriverSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """The driver's snapshot: its two folds, each in its own versioned format, taken at one moment."""

    format: int = DRIVER_SNAPSHOT_FORMAT
    fleet: bytes  # FleetView.snapshot()
    campaigns: bytes  # CampaignBook.snapshot()


_CODEC = SnapshotCodec("campaign driver", CampaignDriverSnapshot, DRIVER_SNAPSHOT_FORMAT)


class CampaignDriver:
    def __init__(
        self,
        settings: CampaignSettings,
        *,
        clock: Callable[[], datetime] = utcnow,
        snapshot_store: SnapshotStore | None = None,
    ) -> None:
        self.settings = settings
        self.topics = settings.stack.topics
        self.clock = clock
        self.book = CampaignBook()
        self.fleet = FleetView()
        self._forgot_at: datetime | None = None  # when old evidence was last forgotten (tick)
        self.ready = asyncio.Event()
        bootstrap = settings.stack.kafka_bootstrap_servers
        self.out = KafkaWriter(bootstrap, self.topics, client_id="hearth-campaigns")
        self._polled: list[CampaignFact] = []  # this poll's campaign facts, folded at its end
        self._handed_over = asyncio.Event()  # set after each poll the follower handed over
        self._recorded: dict[int, int] = {}  # campaigns partition -> offset after its last fact recorded
        self.follower = TopicFollower(
            bootstrap,
            [self.topics.campaigns, self.topics.journal],
            self._on_record,
            SNAPSHOT_NAME,
            after_poll=self._after_poll,
            snapshots=snapshot_policy(settings.stack, SNAPSHOT_NAME, self, store=snapshot_store),
        )

    @property
    def campaigns(self) -> dict[str, Campaign]:
        return self.book.campaigns

    @property
    def catalog(self) -> FirmwareCatalog:
        return self.book.catalog

    async def run(self, stop: asyncio.Event) -> None:
        bootstrap = self.settings.stack.kafka_bootstrap_servers
        await self.out.start()
        requests = AIOKafkaConsumer(
            self.topics.campaign_requests,
            bootstrap_servers=bootstrap,
            group_id=self.settings.consumer_group(),
            # static membership (KIP-345): a restarted driver (there is one) rejoins at once instead of
            # waiting out the killed one's session (measured: 5 s of a 7 s restart)
            group_instance_id=DRIVER_INSTANCE,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        offsets = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)  # end offsets only
        try:
            await offsets.start()
            journal = await topic_partitions(offsets, self.topics.journal)
            await self.follower.start()
            await self.follower.wait_caught_up()
            self.fleet.keep_commands(awaited_commands(self.campaigns.values()))
            await self._resend()
            await requests.start()
            self.ready.set()
            restart = self.follower.restart
            log.info(
                "campaign driver: ready (%d campaigns, %d devices; from %s, %d records read)",
                len(self.campaigns),
                len(self.fleet.devices),
                restart.started_from,
                restart.replayed,
            )
            while not stop.is_set():
                batches = await requests.getmany(timeout_ms=int(self.settings.tick_s * 1000), max_records=100)
                if batches:  # a request sees every fact recorded before it was made (its target devices)
                    ends = await offsets.end_offsets(journal)
                    await self._handed_over_to(
                        self.topics.journal, {tp.partition: e for tp, e in ends.items()}
                    )
                for records in batches.values():
                    for record in records:
                        await self._handle(record.value, record.offset)
                if batches:
                    await requests.commit()
                self._check_follower()
                await self.tick()
            # A clean stop: read its own facts back first, so the snapshot saved next has the campaigns
            # topic's position past them (else it is only ahead of it, and a restart reads them again).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._handed_over_to(self.topics.campaigns, self._recorded), 5.0)
        finally:
            with contextlib.suppress(Exception):
                await requests.stop()
            with contextlib.suppress(Exception):
                await offsets.stop()
            await self.follower.stop()  # a clean stop saves a snapshot: the next start reads no history
            await self.out.stop()

    # ------------------------------------------------------------------------------------ reading

    async def _on_record(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        if topic == self.topics.campaigns:
            try:
                self._polled.append(decode_campaign_fact(value))
            except MalformedRecord as bad:
                log.warning("skipping campaign fact at offset %d: %s", offset, bad)
            return
        value = value or b""
        if not self.fleet.wants(fact_type(value), value):
            return
        try:
            self.fleet.apply(decode_fact(value))
        except MalformedRecord:
            return  # the projector dead-letters it; the view goes on without it

    async def _after_poll(self) -> None:
        polled, self._polled = self._polled, []
        self.book.fold(polled)
        self._handed_over.set()

    def _reached(self, topic: str, ends: dict[int, int]) -> bool:
        positions = self.follower.positions().get(topic, {})
        return all(positions.get(partition, 0) >= end for partition, end in ends.items())

    async def _handed_over_to(self, topic: str, ends: dict[int, int]) -> None:
        """Until the follower has handed over (and the folds have) every record of ``topic`` below ``ends``
        (partition -> offset)."""
        while not self._reached(topic, ends):
            self._check_follower()
            self._handed_over.clear()  # no poll can come between the check and this: no await between
            with contextlib.suppress(TimeoutError):  # to check the follower still runs, now and then
                await asyncio.wait_for(self._handed_over.wait(), 1.0)

    def _check_follower(self) -> None:
        """Stop the driver (the supervisor restarts it) if the follower stopped."""
        failure = self.follower.failure()
        if failure is not None:
            raise RuntimeError("the campaign driver's follower stopped") from failure

    # ------------------------------------------------------------------------------------ snapshot

    def snapshot(self) -> bytes:
        return _CODEC.encode(
            CampaignDriverSnapshot(fleet=self.fleet.snapshot(), campaigns=self.book.snapshot())
        )

    def restore(self, data: bytes) -> None:
        """Replace the fleet view and the campaigns with the saved ones, or raise and leave both as they
        were (both decoded before either is replaced)."""
        saved = _CODEC.decode(data)
        fleet, book = FleetView.from_snapshot(saved.fleet), CampaignBook.from_snapshot(saved.campaigns)
        self.fleet, self.book = fleet, book

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
        self.fleet.keep_commands(awaited_commands(self.campaigns.values()))
        if self._forgot_at is None or now - self._forgot_at >= FORGET_EVERY:
            self.fleet.forget_evidence_before(evidence_since(self.campaigns.values(), now))
            self._forgot_at = now
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
        for sent in await asyncio.gather(*futures):
            self._recorded[sent.partition] = max(self._recorded.get(sent.partition, 0), sent.offset + 1)
        self.book.fold(facts)
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
        await self.out.send_requests(
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
        """After a restart: submit each command a fact named that the journal does not show: the updates
        of running campaigns' sent jobs and the rollbacks not ended (the commands whose statuses the
        fleet view keeps). Not an aborted campaign's updates: each was submitted before the abort (a run
        resends before it decides anything, and a job is never sent in the append that aborts)."""
        for campaign in self.campaigns.values():
            for job in campaign.jobs.values():
                at = job.changed_at or campaign.started_at
                if campaign.status == "running" and job.state == "sent" and job.command_id is not None:
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


__all__ = ["CampaignDriver"]
