"""What devices can no longer say for themselves, said for them on the broker: the broker-access follower's
second job (entrypoints/broker_access_follower.py runs it, on the platform listener with the gateway's
account).

* **A revoked device.** The broker drops it on the reload that refuses its secret and publishes no will
  for that (measured with Mosquitto 2.0.11), so its retained ``online`` would outlive the revocation:
  whoever subscribes to its ``availability`` later would read that it is online. Once that reload is
  done, ``offline`` is published (retained) on its ``availability``. The device actor took the twin
  offline with the revocation itself (``hearth_shared.domain.decide``); the gateway turns this
  ``offline`` into a request that decides nothing more. Only devices still without a credential after
  the batch of facts: one revoked and issued a new secret says ``online`` itself when it comes back.
  Devices revoked while the follower was down are done when it has caught up (a repeat is harmless).
* **A hub's children.** A hub (the fleet simulator) is one connection acting for many devices, and MQTT
  gives a connection one will, fixed at connect: it cannot name children added later. So the hub's will
  is ``offline`` on ``hearth/hubs/{hub}/availability`` (hearth_shared.schema.mqtt), and when that says
  ``offline`` (the will, or the hub's clean close), ``offline`` is published (retained) on each child's
  ``availability``: the gateway takes each to the inbox and the actor takes each child offline at once.
  A hub's children are the devices it acts for on this broker: for the simulator, the devices registered
  with ``"simulated": true`` on this follower's shard (``MosquittoAccess.simulated_here``). The hub says
  ``online`` for itself, then for each child, when it comes back.

Why here: this follower is the one part that both follows the journal (who was revoked, who a hub's
children are) and acts on the broker. The gateways share device messages through shared subscriptions,
so no one gateway sees a hub's will together with its children, and none follows the journal.

Pure: ``publish(topic, payload)`` (retained, QoS 1) is given; no MQTT library here.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable

from hearth_device_gateway.service.mosquitto_access import MosquittoAccess
from hearth_shared.schema.events import MalformedRecord
from hearth_shared.schema.mqtt import (
    HUB_ROOT,
    OFFLINE,
    SIMULATOR_ACCOUNT,
    availability_topic,
    decode_availability,
)

log = logging.getLogger(__name__)

PublishRetained = Callable[[str, bytes], None]


class AvailabilityKeeper:
    def __init__(self, access: MosquittoAccess, publish: PublishRetained) -> None:
        self.access = access
        self.publish = publish
        self.hubs: dict[str, bool] = {}  # hub -> online, as it last said
        self.ready = False  # caught up with the journal: the revoked devices and children are all known
        self.published: Counter[str] = Counter()  # "revoked" / "hub_children" offline messages sent

    def children(self, hub: str) -> list[str]:
        """The devices ``hub`` acts for (only the simulator's account is a hub)."""
        return self.access.simulated_here() if hub == SIMULATOR_ACCOUNT else []

    def caught_up(self) -> None:
        """The whole journal is in: say offline for every revoked device and every dropped hub's children."""
        self.ready = True
        self._offline(self.access.revoked_here(), "revoked")
        for hub, online in sorted(self.hubs.items()):
            if not online:
                self._offline(self.children(hub), "hub_children")

    def revoked(self, device_ids: Iterable[str]) -> None:
        """The broker has reloaded after these devices' credentials were revoked."""
        if self.ready:
            revoked = set(self.access.revoked_here())
            self._offline(sorted(d for d in set(device_ids) if d in revoked), "revoked")

    async def on_hub_message(self, topic: str, payload: bytes) -> None:
        """A message on ``hearth/hubs/{hub}/availability``."""
        parts = topic.split("/")
        if len(parts) != 4 or "/".join(parts[:2]) != HUB_ROOT:
            return
        try:
            online = decode_availability(payload)
        except MalformedRecord as error:  # e.g. an empty message clearing the retained one
            log.info("broker access: ignoring %r on %s (%s)", payload[:40], topic, error.reason)
            return
        hub = parts[2]
        self.hubs[hub] = online
        if self.ready and not online:
            children = self.children(hub)
            log.info("broker access: hub %s dropped; %d children go offline", hub, len(children))
            self._offline(children, "hub_children")

    def _offline(self, device_ids: list[str], why: str) -> None:
        for device_id in device_ids:
            self.publish(availability_topic(device_id), OFFLINE)
        self.published[why] += len(device_ids)


__all__ = ["AvailabilityKeeper", "PublishRetained"]
