"""Batched delivery for ``MqttLink.route_batches``: a connection's incoming messages handed over in
batches, and each batch's PUBACKs written together once its handler returned.

Why: gmqtt acknowledges a message after its async ``on_message`` returns by starting a task for every
message and writing every PUBACK on its own. At the gateway's rates that was most of its time in gmqtt
(a task, a done callback and a socket write per message). Here the messages one read of the socket
brought (everything gmqtt parsed before the loop turns) are one batch: one task, one handler call, one
write of all their PUBACKs.

The guarantees stay those of ``MqttLink``'s per-message handlers:

* a message is acknowledged only after the handler of its batch returned; a handler that raises leaves
  its whole batch unacknowledged (the broker delivers it again on the session's next connection);
* PUBACKs go out in the order the messages came in (MQTT 5, 4.6): a batch's are written only after the
  batch before it was settled (acknowledged or left so);
* a batch is handed over in the order its messages came, and batches in the order they came; the handler
  of one batch may run while the one before it still waits (the gateway's inbox keeps their records in
  that order: it queues them under a lock, see hearth_device_gateway.adapters.inbox_writer);
* the PUBACKs of a batch whose connection dropped meanwhile are not written on the next connection: the
  broker delivers those messages again, and they are acknowledged then.

QoS 0 messages (never sent by the contract's devices) join the batches in their place and need no PUBACK.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

BatchHandler = Callable[[list[tuple[str, bytes]]], Awaitable[None]]

_PUBACK = 0x40020000  # fixed header 0x40, remaining length 2, then the packet id (reason code omitted: 0)


def pubacks(mids: list[int]) -> bytes:
    """The PUBACK packets (MQTT 5, success) of ``mids``, in that order, as one buffer."""
    return struct.pack(f"!{len(mids)}I", *[_PUBACK | mid for mid in mids])


class BatchedDelivery:
    """Gathers messages as the client parses them (``add``) and hands them to ``handler`` per batch.

    ``connection`` says which connection is current (any object, compared by identity) and ``write``
    writes bytes on it: both are gmqtt's, given by ``MqttLink``.
    """

    def __init__(
        self,
        handler: BatchHandler,
        connection: Callable[[], Any],
        write: Callable[[Any, bytes], None],
    ) -> None:
        self.handler = handler
        self.connection = connection
        self.write = write
        self.batches = 0
        self._messages: list[tuple[str, bytes]] = []
        self._mids: list[int] = []
        self._last: asyncio.Task[None] | None = None  # the latest batch under way

    def add(self, mid: int | None, topic: str, payload: bytes) -> None:
        """One message as it was parsed (``mid`` None: QoS 0, nothing to acknowledge)."""
        if not self._messages:
            asyncio.get_running_loop().call_soon(self._hand_over)  # once this read is parsed
        self._messages.append((topic, payload))
        if mid is not None:
            self._mids.append(mid)

    def _hand_over(self) -> None:
        messages, mids = self._messages, self._mids
        self._messages, self._mids = [], []
        if not messages:
            return
        self.batches += 1
        self._last = asyncio.create_task(self._deliver(messages, mids, self.connection(), self._last))

    async def _deliver(
        self,
        messages: list[tuple[str, bytes]],
        mids: list[int],
        connection: Any,
        before: asyncio.Task[None] | None,
    ) -> None:
        try:
            await self.handler(messages)
            handled = True
        except Exception as error:  # the handler said why; the broker delivers the batch again
            log.warning("MQTT batch of %d messages left unacknowledged: %r", len(messages), error)
            handled = False
        if before is not None and not before.done():
            await asyncio.wait([before])  # its PUBACKs first (it never raises: see above)
        if handled and mids and connection is not None and connection is self.connection():
            self.write(connection, pubacks(mids))

    async def settled(self) -> None:
        """Wait until every batch handed over so far was acknowledged (or left unacknowledged)."""
        self._hand_over()
        if self._last is not None:
            await asyncio.wait([self._last])
