"""The device gateway's composition roots: ``make_app(settings)`` builds a ``DeviceGateway``; nothing
connects until ``run``. ``make_follower(settings)`` builds the broker-access follower, the process of
``python -m hearth_device_gateway.broker_access`` (entrypoints/broker_access_follower.py).

One gateway process holds two MQTT connections (each a persistent MQTT 5 session named after its instance),
one Kafka producer (the inbox and the dead letters) and one Kafka consumer (the device-bound topic, in
the gateways' consumer group). It subscribes to every device's ``state``, ``acks`` and ``availability``
(``hearth/devices/+/<channel>``, plain subscriptions of its persistent sessions) and takes the devices of
its slice (all of them with ``slices`` 1: service/slices.py says why slices and not MQTT 5 shared
subscriptions, and what they cost) to the inbox (entrypoints/uplink.py, in batches: one per read of the
socket, acknowledged together once Kafka has them, hearth_shared.adapters.mqtt_batches), and publishes the
commands of the partitions it was given (entrypoints/downlink.py). Several processes with distinct
instances share the commands; each slice has one gateway.

Two connections, one per lane, because the broker queues per connection: a session's queued messages and
its in-flight window (``receive_maximum``) are first in, first out across all its subscriptions, and its
socket carries everything sent both ways. On one connection an ack waited behind every state report
queued before it, and a command went out among the flood's PUBACKs (measured with 200 devices flooding:
commands reached their device after 5.6-11.4 s). So:

* the telemetry connection (``hearth-gateway-{instance}``) subscribes to ``state`` and answers refused
  reports on its ``errors`` topics;
* the command-lane connection (``hearth-gateway-{instance}-lane``) subscribes to ``acks`` and
  ``availability``, publishes the device commands and answers refused acks and availabilities. Nothing
  waits in its queues but the command lane's own traffic.

The lane connects first, so what its session kept while the gateway was away (acks, availability) comes
in before the telemetry backlog; once both run, an ack waits in this process at most behind the reports
already read from the other socket, never behind the broker's queue of them (test_gateway_command_lane).

The connections are independent: when one drops, gmqtt reconnects it (its persistent session keeps what
the broker had for it) while the other goes on; commands published meanwhile wait in the lane link's
outbox. The gateway stops and restarts as before only when its inbox fails (either uplink's ``failed``).
A clean stop unsubscribes both, waits for the inbox, writes the last batches' PUBACKs (``disconnect``
settles them) and ends both sessions. Broker access: the ACL is
the gateway account's (``services.acl``), whatever client id it uses, and the platform listener lets the
service accounts choose their client ids (hearth_devstack.servers.mosquitto), so the second one needs no rule.

The instance is also the consumer's static group membership (Kafka's ``group.instance.id``, KIP-345): a
gateway restarted after a crash rejoins at once with the partitions it had, instead of waiting until the
old member's session times out (measured: 8 s of a 10 s restart). The price: a gateway that stops for
good keeps its partitions until that timeout (10 s), as a crashed one always did; and two processes given
one instance fence each other, which a misconfiguration deserves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime

from aiokafka import AIOKafkaConsumer

from hearth_device_gateway.adapters.inbox_writer import InboxLanes
from hearth_device_gateway.entrypoints.broker_access_follower import BrokerAccessFollower
from hearth_device_gateway.entrypoints.downlink import Downlink
from hearth_device_gateway.entrypoints.uplink import Uplink
from hearth_device_gateway.service.slices import Slice
from hearth_device_gateway.settings import BrokerAccessSettings, DeviceGatewaySettings
from hearth_shared.adapters.kafka import DeadLetters, KafkaWriter
from hearth_shared.adapters.mqtt_link import MqttLink
from hearth_shared.adapters.stop_signals import stop_on_signals
from hearth_shared.schema.events import utcnow
from hearth_shared.schema.mqtt import ACKS, AVAILABILITY, STATE, shared_subscription, wildcard

log = logging.getLogger(__name__)

READY = "device gateway: ready"  # the log line the local stack's health check waits for
STATS_EVERY_S = 30.0


class DeviceGateway:
    def __init__(self, settings: DeviceGatewaySettings, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.settings = settings
        self.clock = clock
        self.uplinks: list[Uplink] = []  # the telemetry connection's, then the command lane's
        self.downlink: Downlink | None = None
        self.ready = asyncio.Event()  # connected, subscribed, consuming

    async def run(self, stop: asyncio.Event) -> None:
        """Bridge until ``stop`` is set (or the inbox fails: then raise, so the process restarts)."""
        s = self.settings
        topics = s.stack.topics
        client_id = f"hearth-gateway-{s.instance}"
        journal = KafkaWriter(s.stack.kafka_bootstrap_servers, topics, client_id=client_id)
        telemetry, lane = self._link(client_id), self._link(f"{client_id}-lane")
        consumer = AIOKafkaConsumer(
            topics.device_commands,
            bootstrap_servers=s.stack.kafka_bootstrap_servers,
            group_id=s.kafka_group(),
            group_instance_id=s.instance,  # static membership: see the module
            client_id=client_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # expired commands are skipped: a first start sends no stale ones
            session_timeout_ms=10_000,
            heartbeat_interval_ms=1_000,
        )
        device_slice = Slice(s.slice, s.slices) if s.slices > 1 else None  # service/slices.py
        subscriptions = {telemetry: [wildcard(STATE)], lane: [wildcard(ACKS), wildcard(AVAILABILITY)]}
        await journal.start()
        try:
            # The uplinks send dead letters concurrently: sends that wait for a topic's first metadata
            # resume in no set order, so a device's first refusals could be answered out of order.
            await journal.producer.partitions_for(topics.dead_letters)
            dead_letters = DeadLetters(journal, consumer=f"device-gateway/{s.instance}")
            inbox = InboxLanes(journal.producer, topics, batch_size=s.batch_size, linger_s=s.linger_ms / 1000)
            uplinks = self.uplinks = [
                Uplink(
                    inbox,
                    dead_letters,
                    link.publish,
                    clock=self.clock,
                    owns=device_slice.owns if device_slice else None,
                )
                for link in subscriptions
            ]
            self.downlink = Downlink(consumer, lane.publish, dead_letters, shard=s.shard, clock=self.clock)
            for link, uplink in zip(subscriptions, uplinks, strict=True):
                link.route_batches(uplink.handle_batch)  # before connecting: the session's come at once
            for link in (lane, telemetry):  # the lane first: what its session kept comes in first
                await link.connect(s.mqtt_host, s.mqtt_port)
            # A session an older gateway left behind may still hold the lane's subscriptions on the
            # telemetry connection, or the shared subscriptions gateways had before slices: drop them,
            # so acks come only through the lane, and each message once.
            group = f"{s.stack.topic_prefix}-gateway"
            before_slices = [shared_subscription(group, c) for c in (STATE, ACKS, AVAILABILITY)]
            for topic_filter in [*subscriptions[lane], *before_slices]:
                telemetry.unsubscribe(topic_filter)
            for topic_filter in before_slices:
                lane.unsubscribe(topic_filter)
            for link, topic_filters in subscriptions.items():
                for topic_filter in topic_filters:
                    link.subscribe(topic_filter)
                await link.subscribed()
            await consumer.start()
            try:
                await self._serve(stop, uplinks, self.downlink)
            finally:
                await consumer.stop()
                # A clean stop leaves the group for good: no new messages, the ones under way acked once
                # the inbox has them, then the sessions end (a stopped member must not hold messages).
                unsubscribed = [
                    link.unsubscribe(f) for link, filters in subscriptions.items() for f in filters
                ]
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.gather(*unsubscribed), 10)
                await inbox.close()
                failed = any(uplink.failed.is_set() for uplink in uplinks)
                await asyncio.gather(*(link.disconnect(end_session=not failed) for link in subscriptions))
        finally:
            await journal.stop()

    def _link(self, client_id: str) -> MqttLink:
        s = self.settings
        return MqttLink(
            client_id=client_id,
            username=s.mqtt_username,
            password=s.mqtt_password,
            keepalive_s=s.mqtt_keepalive_s,
            session_expiry_s=s.mqtt_session_expiry_s,
            receive_maximum=s.receive_maximum,
        )

    async def _serve(self, stop: asyncio.Event, uplinks: list[Uplink], downlink: Downlink) -> None:
        self.ready.set()
        s = self.settings
        log.info("%s (instance %s, slice %d of %d, shard %s)", READY, s.instance, s.slice, s.slices, s.shard)
        async with asyncio.TaskGroup() as tasks:
            commands = tasks.create_task(downlink.run())
            stats = tasks.create_task(self._log_stats())
            stopped = tasks.create_task(stop.wait())
            failed = [tasks.create_task(uplink.failed.wait()) for uplink in uplinks]
            await asyncio.wait({commands, stopped, *failed}, return_when=asyncio.FIRST_COMPLETED)
            for task in (commands, stats, stopped, *failed):
                task.cancel()
        if any(uplink.failed.is_set() for uplink in uplinks):
            raise RuntimeError("the inbox refused records; the gateway stops so they are delivered again")

    async def _log_stats(self) -> None:
        while True:
            await asyncio.sleep(STATS_EVERY_S)
            if self.uplinks and self.downlink:
                log.info(
                    "gateway: %d device messages in, %d refused, %d commands out, %d stale commands skipped",
                    sum(uplink.accepted for uplink in self.uplinks),
                    sum(uplink.refused for uplink in self.uplinks),
                    self.downlink.sent,
                    self.downlink.stale,
                )


def make_app(settings: DeviceGatewaySettings, *, clock: Callable[[], datetime] = utcnow) -> DeviceGateway:
    """The gateway, not connected yet (``await gateway.run(stop)`` connects and bridges)."""
    return DeviceGateway(settings, clock=clock)


def make_follower(
    settings: BrokerAccessSettings | None = None, *, reload: Callable[[], None] | None = None
) -> BrokerAccessFollower:
    """The broker-access follower (its process: broker_access.py), not connected yet (``start``)."""
    return BrokerAccessFollower(settings or BrokerAccessSettings(), reload=reload)


async def run_until_signalled(gateway: DeviceGateway) -> None:
    """Run until SIGINT or SIGTERM."""
    await gateway.run(stop_on_signals())
