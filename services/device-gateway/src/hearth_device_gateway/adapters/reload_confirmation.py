"""Knowing when the broker has applied a reload, so nothing that depends on the new files is said before.

SIGHUP is asynchronous: Mosquitto notes it and applies it on its next turn of its event loop, after
whatever packets it is reading. What the broker-access follower says after a reload depends on the new
files being in force: that a hub may act for a device now (a hub that publishes for a device its ACL does
not allow yet loses its connection: Debian's Mosquitto 2.0.11 drops a client on any denied publish,
measured), and that a revoked device is offline.

The files carry a mark (``mosquitto_access.BrokerFiles.mark``): the gateway account may read
``{RELOADS_ROOT}/{mark}`` under those files only. The follower subscribes to ``{RELOADS_ROOT}/+`` and
publishes to its mark's topic; the broker checks read access per message when it delivers, so the
message comes back only once the files with that mark are loaded. Until then it is published again every
``RETRY_S`` (a message the broker handled before its reload is not delivered, and not kept). After
``timeout_s`` the follower goes on with a warning: a late word is better than none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from hearth_shared.adapters.mqtt_link import MqttLink
from hearth_shared.schema.mqtt import RELOADS_ROOT

log = logging.getLogger(__name__)

RETRY_S = 0.05


class ReloadConfirmation:
    def __init__(self, link: MqttLink) -> None:
        self.link = link
        self._waiting: dict[str, asyncio.Event] = {}
        link.subscribe(f"{RELOADS_ROOT}/+", self._on_mark)  # before connect: see MqttLink.route

    async def _on_mark(self, topic: str, _payload: bytes) -> None:
        waiting = self._waiting.get(topic.rsplit("/", 1)[-1])
        if waiting is not None:
            waiting.set()

    async def loaded(self, mark: str, timeout_s: float = 10.0) -> bool:
        """True once the broker delivers the message only the files with ``mark`` let through."""
        arrived = self._waiting.setdefault(mark, asyncio.Event())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while not arrived.is_set():
                if loop.time() > deadline:
                    log.warning("broker access: reload %s not confirmed in %g s", mark, timeout_s)
                    return False
                self.link.publish(f"{RELOADS_ROOT}/{mark}", b"").add_done_callback(_ignore_failure)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(arrived.wait(), RETRY_S)
            return True
        finally:
            del self._waiting[mark]


def _ignore_failure(sent: asyncio.Future[None]) -> None:
    if not sent.cancelled():
        sent.exception()  # retrieved: the next retry publishes again


__all__ = ["RETRY_S", "ReloadConfirmation"]
