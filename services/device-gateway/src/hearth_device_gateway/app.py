"""The device gateway's composition root: ``make_app(settings)`` builds a ``DeviceGateway``; nothing
connects until ``run``.

One gateway process holds one MQTT connection (a persistent MQTT 5 session named after its instance),
one Kafka producer (the inbox and the dead letters) and one Kafka consumer (the device-bound topic, in
the gateways' consumer group). It subscribes to every device's ``state``, ``acks`` and
``availability`` through MQTT 5 shared subscriptions (``$share/<group>/hearth/devices/+/<channel>``),
so each device message goes to one gateway of the group (uplink.py), and publishes the commands of the
partitions it was given (downlink.py). Several processes with distinct instances share the work.

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

from hearth_device_gateway.downlink import Downlink
from hearth_device_gateway.inbox_writer import InboxLanes
from hearth_device_gateway.settings import DeviceGatewaySettings
from hearth_device_gateway.uplink import Uplink
from hearth_shared.adapters.kafka import DeadLetters, KafkaWriter
from hearth_shared.adapters.mqtt_link import MqttLink
from hearth_shared.schema.events import utcnow
from hearth_shared.schema.mqtt import ACKS, AVAILABILITY, STATE, shared_subscription

log = logging.getLogger(__name__)

READY = "device gateway: ready"  # the log line the local stack's health check waits for
STATS_EVERY_S = 30.0


class DeviceGateway:
    def __init__(self, settings: DeviceGatewaySettings, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.settings = settings
        self.clock = clock
        self.uplink: Uplink | None = None
        self.downlink: Downlink | None = None
        self.ready = asyncio.Event()  # connected, subscribed, consuming

    async def run(self, stop: asyncio.Event) -> None:
        """Bridge until ``stop`` is set (or the inbox fails: then raise, so the process restarts)."""
        s = self.settings
        topics = s.stack.topics
        client_id = f"hearth-gateway-{s.instance}"
        journal = KafkaWriter(s.stack.kafka_bootstrap_servers, topics, client_id=client_id)
        link = MqttLink(
            client_id=client_id,
            username=s.mqtt_username,
            password=s.mqtt_password,
            keepalive_s=s.mqtt_keepalive_s,
            session_expiry_s=s.mqtt_session_expiry_s,
            receive_maximum=s.receive_maximum,
        )
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
        await journal.start()
        try:
            dead_letters = DeadLetters(journal, consumer=f"device-gateway/{s.instance}")
            inbox = InboxLanes(journal.producer, topics, batch_size=s.batch_size, linger_s=s.linger_ms / 1000)
            uplink = self.uplink = Uplink(
                inbox, dead_letters, lambda topic, payload: link.publish(topic, payload), clock=self.clock
            )
            self.downlink = Downlink(consumer, link.publish, dead_letters, clock=self.clock)
            link.route(uplink.handle)  # before connecting: the session's messages come at once
            await link.connect(s.mqtt_host, s.mqtt_port)
            subscriptions = [shared_subscription(s.mqtt_group(), c) for c in (STATE, ACKS, AVAILABILITY)]
            for topic_filter in subscriptions:
                link.subscribe(topic_filter)
            await link.subscribed()
            await consumer.start()
            try:
                await self._serve(stop, uplink, self.downlink)
            finally:
                await consumer.stop()
                # A clean stop leaves the group for good: no new messages, the ones under way acked once
                # the inbox has them, then the session ends (a stopped member must not hold messages).
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.gather(*map(link.unsubscribe, subscriptions)), 10)
                await inbox.close()
                await asyncio.sleep(0.1)  # the last PUBACKs
                await link.disconnect(end_session=not uplink.failed.is_set())
        finally:
            await journal.stop()

    async def _serve(self, stop: asyncio.Event, uplink: Uplink, downlink: Downlink) -> None:
        self.ready.set()
        log.info("%s (instance %s, group %s)", READY, self.settings.instance, self.settings.mqtt_group())
        async with asyncio.TaskGroup() as tasks:
            commands = tasks.create_task(downlink.run())
            stats = tasks.create_task(self._log_stats())
            stopped = tasks.create_task(stop.wait())
            failed = tasks.create_task(uplink.failed.wait())
            await asyncio.wait({commands, stopped, failed}, return_when=asyncio.FIRST_COMPLETED)
            for task in (commands, stats, stopped, failed):
                task.cancel()
        if uplink.failed.is_set():
            raise RuntimeError("the inbox refused records; the gateway stops so they are delivered again")

    async def _log_stats(self) -> None:
        while True:
            await asyncio.sleep(STATS_EVERY_S)
            if self.uplink and self.downlink:
                log.info(
                    "gateway: %d device messages in, %d refused, %d commands out, %d stale commands skipped",
                    self.uplink.accepted,
                    self.uplink.refused,
                    self.downlink.sent,
                    self.downlink.stale,
                )


def make_app(settings: DeviceGatewaySettings, *, clock: Callable[[], datetime] = utcnow) -> DeviceGateway:
    """The gateway, not connected yet (``await gateway.run(stop)`` connects and bridges)."""
    return DeviceGateway(settings, clock=clock)


async def run_until_signalled(gateway: DeviceGateway) -> None:
    """Run until SIGINT or SIGTERM."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await gateway.run(stop)
