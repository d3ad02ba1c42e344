"""Device slices: which gateway takes a device's messages when several gateways run on one broker
(issue 21). Not a broker slice (``hearth_shared.schema.slices``): the slices of one slice's devices.

Each of n gateways (``slices`` n; 1 by default: one gateway takes every device) subscribes to every
device's topics with plain subscriptions (each its own persistent session) and takes only the devices of
its slice (``Slice.owns``: CRC-32 of the device id, modulo n); it acknowledges the other devices' copies
with their batch, unread. So all of a device's messages go through one gateway, in the order the broker
got them, and each slice's inbox records keep that order. The price: the broker sends every message to
every gateway, so each one still pays the MQTT receive of all of them (parsing only: a few microseconds
each, batched), while the edge and Kafka work is split n ways; and a slice has exactly one gateway (one
that is down keeps its devices' messages in its session until it is back, as any gateway's).

Why not MQTT 5 shared subscriptions (the gateways' way until 2026-11-28):
- the broker hands a group's messages out one by one (Mosquitto: round robin), so two consecutive
  reports of one device could go through two gateways and reach the inbox in either order; the device
  actor drops the older one as stale (its seq is not above the last), so that report is no fact;
- Mosquitto (2.0.11, measured here with mosquitto_sub -c and a kill -9) restores a persistent session's
  plain subscriptions after a restart, not its shared ones: what devices published between the broker's
  restart and the gateway's subscribing again had no subscriber and was dropped (PUBACK reason 16, "no
  matching subscribers", to the device). test_kill_parts lost a command's answering report so.

CRC-32 rather than the inbox partition's murmur2: it is C (``zlib``), needs no cache whatever the number
of devices, and is the same in every process (``hash()`` is not).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Slice:
    index: int  # 0 .. count - 1
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"slice {self.index} of {self.count}: needs 0 <= slice < slices")

    def owns(self, topic: str) -> bool:
        """Whether this slice takes the device of ``hearth/devices/<device id>/<channel>`` (a topic
        without a device level goes to slice 0, which refuses it)."""
        levels = topic.split("/", 3)
        device = levels[2] if len(levels) > 2 else ""
        return zlib.crc32(device.encode()) % self.count == self.index
