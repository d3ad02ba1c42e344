"""Publish a ``History`` (history.py) through the normal device path: MQTT to the broker, the device gateway
to the inbox, the device actor to the journal, as a live device's reports go; nothing here writes Kafka.

It connects with the simulator's credential (the broker lets it write the state topics of devices
registered as simulated) as a connection of its own, not as the hub: no will, no hub ``online``, no
device ``availability``, so ending it takes no device offline (the live hub's will would take all of
them). Like the hub, it publishes for a device only once the broker's ACL has it (the retained
``allowed`` on ``hearth/hubs/{hub}/devices/{device}``): Mosquitto drops a connection that publishes what
its ACL denies.

A slice (an hour of simulated time, every room's messages) at a time, each slice's publishes awaited
together (the link keeps up to ``max_in_flight`` unacknowledged), so every device reports again well
within the actor's ``offline_after`` and the gateway sees each device's messages in order; at most
``max_per_s`` messages a second (``DEFAULT_MAX_PER_S``). Why a cap: faster than the device actor decides
them, the inbox falls behind, and past ``coalesce_after`` records of backlog the actor folds a device's
reports into one (services/device-actor coalescing.py), which keeps the newest values but loses the device
time of the changes in between: a manual change's time is what a learner needs. The cap is what one actor
on a laptop keeps up with; a bigger stack can take a higher one (``hearth simulate --history-rate``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from hearth_shared.adapters.mqtt_link import MqttLink
from hearth_shared.schema.mqtt import ALLOWED, hub_child_topic
from hearth_simulator.fleet import MqttEndpoint
from hearth_simulator.history import HISTORY_SEQ_LEAD, History, Home
from hearth_simulator.registration import register_fleet

log = logging.getLogger(__name__)

ALLOWED_WAIT_S = 60.0
DEFAULT_MAX_PER_S = 3000.0


@dataclass(frozen=True)
class Written:
    """What a history run published, and how long it took."""

    messages: int
    devices: int
    elapsed_s: float


async def write_history(
    history: History,
    mqtt: MqttEndpoint,
    *,
    max_per_s: float = DEFAULT_MAX_PER_S,
    client_id: str = "hearth-simulator-history",
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
        paced_from = time.monotonic()
        for records in history.slices():
            await asyncio.gather(*(link.publish(topic, payload) for topic, payload in records))
            messages += len(records)
            ahead_s = paced_from + messages / max_per_s - time.monotonic()
            if ahead_s > 0:
                await asyncio.sleep(ahead_s)  # the cap: not faster than the actor decides
    finally:
        await link.disconnect()
    written = Written(messages, len(devices), time.monotonic() - began)
    log.info("simulator: wrote %d messages of history for %d devices in %.1f s", *vars(written).values())
    return written


async def simulate_history(
    api_url: str,
    admin_token: str,
    mqtt: MqttEndpoint,
    home_ids: list[str],
    thermostats: int,
    span_s: float,
    *,
    seed: int = 0,
    max_per_s: float = DEFAULT_MAX_PER_S,
) -> tuple[History, Written]:
    """``hearth simulate --history``: register ``thermostats`` simulated thermostats in each home (through
    the command API; registered already is fine), then write ``span_s`` of their history ending now."""
    homes = []
    for home_id in home_ids:
        ids = await register_fleet(api_url, admin_token, home_id, {"thermostat": thermostats})
        homes.append(Home(home_id, tuple(ids)))
    now = time.time()
    history = History(homes, now - span_s, now, seq_base=int(now * 1000) + HISTORY_SEQ_LEAD, seed=seed)
    return history, await write_history(history, mqtt, max_per_s=max_per_s)


__all__ = ["Written", "simulate_history", "write_history"]
