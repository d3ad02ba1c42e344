"""MQTT broker shards: which broker a device connects to. Pure (hashlib): no I/O.

Mosquitto has no clustering, so one broker holds every connection it serves; a deployment that outgrows
one runs several, each a *shard* with its own devices, broker-access follower and gateways. A shard has a
name (an identifier, ``hearth_shared.schema.ids``) and two addresses, the devices' and the platform's
(``hearth_shared.adapters.settings.MqttShard``).

Invariants:

* **A device's shard is a fact.** The command API picks it once, at registration (``assign_shard``), and
  it travels in the ``register_device`` request into the journal's ``device.registered``; from then on
  everyone reads it from the journal (the twin's ``shard``, the broker-access followers' fold, the
  command API's device book), never recomputes it. So adding a shard to the settings moves no device
  that exists: only new registrations spread over the new list.
* **Only an operator moves a device** (``hearth device move-shard``: ``device.moved``), and the move
  issues new credentials naming the new broker (the old secret stops working).
* **Facts from before shards name none**: they decode as ``DEFAULT_SHARD``, the one broker there was, so
  every configured shard list has a shard of that name.

The pick is a stable hash of the device id over the names in the order configured (not Python's
``hash``, which differs per process): every command-API process picks alike, and a registration retried
through another process lands on the same shard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

DEFAULT_SHARD: Final = "0"


def assign_shard(device_id: str, shards: Sequence[str]) -> str:
    """The shard a new device gets: ``shards[h(device_id) mod len(shards)]`` with a stable hash."""
    if not shards:
        raise ValueError("no MQTT shard configured")
    digest = hashlib.blake2b(device_id.encode(), digest_size=8).digest()
    return shards[int.from_bytes(digest, "big") % len(shards)]


__all__ = ["DEFAULT_SHARD", "assign_shard"]
