"""Publish a ``History`` (history.py) through the normal device path: MQTT to the broker, the device gateway
to the inbox, the device actor to the journal, as a live device's reports go; nothing here writes Kafka.

It connects with the simulator's credential (the broker lets it write the state topics of devices
registered as simulated) as a connection of its own, not as the hub: no will, no hub ``online``, no
device ``availability``, so ending it takes no device offline (the live hub's will would take all of
them). Like the hub, it publishes for a device only once the broker's ACL has it (the retained
``allowed`` on ``hearth/hubs/{hub}/devices/{device}``): Mosquitto drops a connection that publishes what
its ACL denies.

As fast as the broker takes it: a slice (an hour of simulated time, every room's messages) at a time,
each slice's publishes awaited together (the link keeps up to ``max_in_flight`` unacknowledged), so every
device reports again well within the actor's ``offline_after`` and the gateway sees each device's
messages in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from hearth_shared.adapters.mqtt_link import MqttLink
from hearth_shared.schema.mqtt import ALLOWED, hub_child_topic
from hearth_simulator.fleet import MqttEndpoint
from hearth_simulator.history import History

log = logging.getLogger(__name__)

ALLOWED_WAIT_S = 60.0


@dataclass(frozen=True)
class Written:
    """What a history run published, and how long it took."""

    messages: int
    devices: int
    elapsed_s: float


async def write_history(
    history: History, mqtt: MqttEndpoint, *, client_id: str = "hearth-simulator-history"
) -> Written:
    """Publish every message of ``history``; returns once the broker has them all."""
    devices = {room.device_id for room in history.rooms}
    allowed: set[str] = set()
    all_allowed = asyncio.Event()

    async def on_allowed(topic: str, payload: bytes) -> None:
        if payload == ALLOWED:
            allowed.add(topic.rsplit("/", 1)[-1])
            if devices <= allowed:
                all_allowed.set()

    link = MqttLink(client_id=client_id, username=mqtt.username, password=mqtt.password, persistent=False)
    link.subscribe(hub_child_topic(mqtt.username, "+"), on_allowed)
    began = time.monotonic()
    await link.connect(mqtt.host, mqtt.port)
    messages = 0
    try:
        try:
            await asyncio.wait_for(all_allowed.wait(), ALLOWED_WAIT_S)
        except TimeoutError:
            missing = sorted(devices - allowed)
            raise RuntimeError(f"the broker does not let the simulator act for {missing[:5]}...") from None
        for records in history.slices():
            await asyncio.gather(*(link.publish(topic, payload) for topic, payload in records))
            messages += len(records)
    finally:
        await link.disconnect()
    written = Written(messages, len(devices), time.monotonic() - began)
    log.info("simulator: wrote %d messages of history for %d devices in %.1f s", *vars(written).values())
    return written


__all__ = ["Written", "write_history"]
