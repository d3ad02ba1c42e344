"""The broker-access follower: keeps Mosquitto's password and ACL files equal to the journal's facts, and
says on the broker what devices can no longer say for themselves (service/availability_keeper.py).

The follower (its process: ``python -m hearth_device_gateway.broker_access``) follows the journal
(``TopicFollower``), folds the credential and registration facts into ``MosquittoAccess`` and, once caught
up and after every poll of facts that changed something, rewrites the broker's ``passwd`` and ``acl`` files
(atomically, only when their text changed) and sends the broker SIGHUP (adapters/mosquitto_files.py). On
SIGHUP Mosquitto re-reads both files and checks every connected client again, disconnecting those no longer
allowed: that is how a revoked or rotated credential drops a connected device.

Restart from a snapshot, not from the journal's first offset. The fold (one hash and credential id per
device with a credential, the simulated and the revoked device ids) is saved with the journal positions it
reflects on the stack's compacted snapshots topic (``snapshot_policy``: every
``HEARTH_SNAPSHOT_EVERY_S``, 60 s, or 500,000 records read, and at a clean stop), and a start restores it and
reads only the journal after it. Why that mechanism: the state is small and bounded by the fleet, not the
journal's age (an operator measured 38 s to come back from the first offset at +6 million facts), the
snapshots topic is Kafka, which this part needs anyway, and the journal's positions are saved with the
state they produced, so the two agree. The snapshot is also what keeps a device whose
``device.credentials_issued`` a retention window removed connectable: without it, a restart after
retention refused such a device (not authorised). Invariants:

* the first files are written and the broker reloaded (forced, even if the files on disk are already
  these) once the follower has read the journal to the end offsets seen at start-up, and only then is
  ``caught_up`` set: a broker restarted with stale or missing files is repaired before anyone relies on
  it, and nothing is written from half a fold;
* after that, at most one reload per poll of the journal (``after_poll``), and only if a fact changed
  the files;
* the snapshot's name is one per broker (``BrokerAccessSettings.follower_name``: its platform listener),
  so two brokers in one stack have two followers, each with its own snapshot and restart report
  (``restart``, also written to ``$HEARTH_FOLLOWER_REPORTS/{name}.json``).

Why a password file and an ACL with ``%u`` patterns rather than the dynamic-security plugin (both were
tried against Debian's mosquitto 2.0.11):

* The hash Hearth computes is the one the broker checks. The password file holds Mosquitto's ``$7$``
  PBKDF2-SHA512 strings, exactly those in the ``device.credentials_issued`` facts, so the broker's whole
  access state is rebuilt from the journal (or a snapshot of its fold) and the plaintext exists only in
  the command API's answer.
  dynsec's ``createClient``/``setClientPassword`` take the plaintext (the broker hashes it), so Hearth
  would have to keep or forward the secret, and a rebuild from facts could not restore anyone.
* One set of ``pattern`` lines covers every device. dynsec 2.0.11 substitutes ``%u`` in publish ACLs but
  not in subscribe ACLs (measured: ``subscribePattern hearth/devices/%u/commands`` refused the device its
  own topic), so it would need a role per device.
* Measured revoke -> disconnect: a SIGHUP reload re-checks every connected client, so its cost grows
  with them: with 10,000 credentials and 5,000 connected devices (10 PBKDF2 iterations, see
  ``hearth_shared.schema.credentials``) the broker answered again 0.2-0.4 s after the SIGHUP and the revoked
  device was dropped 0.4 s after it (with 100 connected: 50 ms). dynsec's ``deleteClient`` kicks one
  client in O(1). End to end through the command API, actor and journal the integration tests assert
  under 5 s (tests/integration/test_mqtt_credentials.py).

The costs: the follower must share the broker's filesystem and be able to signal it (same host, or in
compose the same volume and ``pid: service:mosquitto``); a reload re-reads the files and re-checks every
connected client (PBKDF2 each), so changes are batched, one reload per poll of the journal; Mosquitto
2.0's ACL file grants a SUBSCRIBE to another device's topic but never delivers a message on it (read
access is checked per message), where dynsec would refuse the SUBACK. Session takeover (a device
connecting with another device's client id) is closed by the broker's listeners, not here: the device
listeners force client id = username, and the platform's accounts have a listener of their own
(``hearth_devstack.servers.mosquitto``).

After a reload the follower waits until the broker has applied it (adapters/reload_confirmation.py) before it
says anything that depends on the new files: a revoked device's ``offline`` (service/availability_keeper.py),
for each newly simulated device, retained ``allowed`` on ``hearth/hubs/{hub}/devices/{device}``, which the
simulator hub waits for before it acts for the device, and for each credential those files brought in, a
``record_credentials_loaded`` request on the inbox: the device actor records ``device.credentials_loaded``,
and the command API answers the registration (or rotation, or shard move) that issued the credential only
then, so a device connecting right after the answer is let in (README, "Decisions where the contract is
silent"). Only credentials issued in the last ``CONFIRM_WITHIN_S`` are confirmed (nobody waits longer
for one; a replay from the first offset does not confirm the whole fleet again); the actor records one
confirmation per credential, so a repeat after a restart is harmless.

Shards: each MQTT broker has its own follower (``BrokerAccessSettings.shard``), which writes only its
shard's devices' credentials (service/mosquitto_access.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

from hearth_device_gateway.adapters.mosquitto_files import replace_if_changed, signal_broker
from hearth_device_gateway.adapters.reload_confirmation import ReloadConfirmation
from hearth_device_gateway.service.availability_keeper import AvailabilityKeeper
from hearth_device_gateway.service.mosquitto_access import MosquittoAccess, service_files
from hearth_device_gateway.settings import BrokerAccessSettings
from hearth_shared.adapters.kafka import KafkaWriter, held_fetches
from hearth_shared.adapters.mqtt_link import MqttLink
from hearth_shared.adapters.topic_follower import RestartReport, TopicFollower, snapshot_policy
from hearth_shared.schema.events import (
    DeviceCredentialsIssued,
    DeviceCredentialsRevoked,
    DeviceRegistered,
    DeviceShardMoved,
    Event,
    MalformedRecord,
    RecordCredentialsLoaded,
    decode_event,
    fact_type,
    new_id,
    utcnow,
    wire_name,
)
from hearth_shared.schema.mqtt import ALLOWED, SIMULATOR_ACCOUNT, hub_availability_topic, hub_child_topic

log = logging.getLogger("hearth_device_gateway.broker_access")

FACT_TYPES = frozenset(
    wire_name(t)
    for t in (DeviceRegistered, DeviceCredentialsIssued, DeviceCredentialsRevoked, DeviceShardMoved)
)
POLL_RECORDS = 20_000  # journal records per poll at most: one reload per poll, whatever the backlog
CONFIRM_WITHIN_S = 600.0  # credentials issued longer ago than this are not confirmed loaded (see above)


class BrokerAccessFollower:
    """Follows the journal (``TopicFollower``, from a snapshot) and applies ``MosquittoAccess`` to the
    broker's files."""

    def __init__(
        self,
        settings: BrokerAccessSettings,
        *,
        access: MosquittoAccess | None = None,
        reload: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.access = access or MosquittoAccess(shard=settings.shard)
        self.reload = reload or (lambda: signal_broker(settings.pid_file))
        self.reloads = 0
        self.loaded_mark = ""  # the mark of the files the broker was last seen to have loaded
        self.confirmed = 0  # credentials confirmed loaded (record_credentials_loaded requests sent)
        self.link: MqttLink | None = None
        self.keeper: AvailabilityKeeper | None = None
        self.confirmation: ReloadConfirmation | None = None
        self.announced: set[str] = set()  # simulated devices the hub was told it may act for
        # What the current poll changed: applied (and the revoked told offline) in ``_after_poll``.
        self._changed = False
        self._revoked: set[str] = set()
        stack, name = settings.stack, settings.follower_name()
        self.inbox = KafkaWriter(stack.kafka_bootstrap_servers, stack.topics, client_id=name)
        self.feed = TopicFollower(
            stack.kafka_bootstrap_servers,
            [stack.topics.journal],
            self._on_record,
            name,
            after_poll=self._after_poll,
            on_caught_up=self._on_caught_up,
            max_records=POLL_RECORDS,
            poll_ms=settings.poll_ms,
            snapshots=snapshot_policy(stack, name, self.access),
            # One reload per poll at most anyway: the broker holds a fetch up to a poll's length unless a
            # backlog is there, so the follower wakes once a poll, not at every journal write.
            consumer_settings=held_fetches(settings.poll_ms),
        )
        # Set once the first files are written and the broker has loaded them (``_on_caught_up``).
        self.caught_up = self.feed.caught_up

    @property
    def restart(self) -> RestartReport:
        """What the last start read: from a snapshot or the first offset, records replayed, snapshot age."""
        return self.feed.restart

    async def start(self) -> None:
        if self.settings.gateway_password or self.settings.simulator_password:  # compose: accounts from env
            passwd, acl = service_files(self.settings.gateway_password, self.settings.simulator_password)
            replace_if_changed(self.settings.access_dir / "services.passwd", passwd)
            replace_if_changed(self.settings.access_dir / "services.acl", acl)
        await self._connect_broker()
        await self.inbox.start()
        await self.feed.start()

    async def _connect_broker(self) -> None:
        """The MQTT side (service/availability_keeper.py), on the platform listener; none without a
        password."""
        s = self.settings
        password = s.mqtt_password or s.gateway_password
        if not password:
            log.warning("broker access: no MQTT password; revoked devices' and dropped hubs' availability "
                        "is left as it is")  # fmt: skip
            return
        self.link = link = MqttLink(
            client_id=f"hearth-broker-access-{s.stack.topic_prefix}",
            username=s.mqtt_username,
            password=password,
            persistent=False,  # the hubs' availability is retained: a new session reads it again
        )
        self.keeper = AvailabilityKeeper(self.access, self._publish_retained)
        self.confirmation = ReloadConfirmation(link)
        link.subscribe(hub_availability_topic("+"), self.keeper.on_hub_message)
        await link.connect(s.mqtt_host, s.mqtt_port)
        await link.subscribed()

    def _publish_retained(self, topic: str, payload: bytes) -> None:
        assert self.link is not None
        self.link.publish(topic, payload, retain=True).add_done_callback(_log_failure)

    async def stop(self) -> None:
        """Stops following (a clean stop saves a snapshot: the next start reads nothing again)."""
        await self.feed.stop()
        await self.inbox.stop()
        if self.link is not None:
            await self.link.disconnect()

    async def _on_record(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        event = _access_fact(value)
        if event is not None and self.access.apply(event):
            self._changed = True
            if isinstance(event, DeviceCredentialsRevoked):
                self._revoked.add(event.device_id)

    async def _after_poll(self) -> None:
        """A poll's facts are in: once caught up, rewrite the files and reload if they changed something,
        then say offline for the devices whose secrets that reload refused. Before, nothing: the first
        files are written once the whole journal is in (``_on_caught_up``)."""
        changed, revoked = self._changed, self._revoked
        self._changed, self._revoked = False, set()
        if not changed or not self.caught_up.is_set():
            return
        await self._apply_files()
        if self.keeper is not None:  # after the reload that refused their secrets
            self.keeper.revoked(revoked)

    async def _on_caught_up(self) -> None:
        """The journal is read to its start-up ends: the first files, and the broker reloaded whatever is
        on disk (it may hold older files, or none); then every revoked device is told offline."""
        self._changed, self._revoked = False, set()
        await self._apply_files(force=True)
        if self.keeper is not None:
            self.keeper.caught_up()
        restart = self.restart
        log.info(
            "broker access caught up with the journal: %d device credentials, %d simulated devices "
            "(%s, %d records read)",
            len(self.access.hashes),
            len(self.access.simulated),
            restart.started_from,
            restart.replayed,
        )

    async def wait_stopped(self) -> None:
        """Returns when the follower's feed ended (raising what ended it, if anything)."""
        await self.feed.wait_stopped()

    @property
    def failed(self) -> BaseException | None:
        """What ended the follower's feed, if it ended with an error."""
        return self.feed.failure()

    async def _apply_files(self, *, force: bool = False) -> None:
        """Render both files; write those whose text changed and reload the broker if any did (or if
        ``force``). Returns once the broker has loaded them (adapters/reload_confirmation.py), then tells the
        hubs their new children."""
        access_dir = self.settings.access_dir
        files = self.access.files((access_dir / "services.acl").read_text())
        written = replace_if_changed(access_dir / "passwd", files.passwd)
        written |= replace_if_changed(access_dir / "acl", files.acl)
        if written or force:
            self.reload()
            self.reloads += 1
            if self.confirmation is not None and await self.confirmation.loaded(files.mark):
                self.loaded_mark = files.mark
        if self.loaded_mark == files.mark:  # (unchanged files: the broker has had them since that reload)
            await self._confirm_loaded()
        if self.link is not None:
            self._announce_children()
        if written and not force:
            log.info(
                "broker access files rewritten and the broker reloaded (%d credentials)",
                len(self.access.hashes),
            )

    async def _confirm_loaded(self) -> None:
        """The broker has loaded the files holding the pending credentials: ask the actor to record
        ``device.credentials_loaded`` for each issued recently enough that someone may wait for it."""
        since = utcnow() - timedelta(seconds=CONFIRM_WITHIN_S)
        shard, now = self.access.shard, utcnow()
        requests = [
            RecordCredentialsLoaded(
                request_id=new_id(),
                device_id=device_id,
                sent_at=now,
                credential_id=pending.credential_id,
                shard=shard,
            )
            for device_id, pending in sorted(self.access.take_pending().items())
            if pending.issued_at >= since
        ]
        if requests:
            await self.inbox.send_requests(*requests)
            self.confirmed += len(requests)

    def _announce_children(self) -> None:
        """Retained ``allowed`` on ``hearth/hubs/{hub}/devices/{device}`` for each device the broker now
        lets the simulator hub act for (all of them again after a restart: a repeat is harmless)."""
        for device_id in sorted(self.access.simulated - self.announced):
            self._publish_retained(hub_child_topic(SIMULATOR_ACCOUNT, device_id), ALLOWED)
            self.announced.add(device_id)


def _access_fact(value: bytes | None) -> Event | None:
    """A registration or credential fact, decoded; None for any other record (or a malformed one: the
    projector dead-letters it)."""
    if fact_type(value) not in FACT_TYPES:
        return None
    try:
        return decode_event(value or b"")
    except MalformedRecord:
        return None


def _log_failure(sent: asyncio.Future[None]) -> None:
    if not sent.cancelled() and sent.exception() is not None:
        log.warning("broker access: an availability message was not delivered: %r", sent.exception())
