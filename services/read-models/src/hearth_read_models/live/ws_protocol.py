"""The query API's websocket transport: uvicorn's sans-I/O websockets protocol, with the contract's close
code for a client that does not read.

A client that stops reading stops answering pings (its library answers a ping only once it reads it).
uvicorn then fails the connection with 1011, which the contract reserves for a lost live feed (resume with
``after``); here it is 4408, "too slow". And when the hub closes an overflowing client with 4408, the close
frame is written behind what is already buffered at once: uvicorn's ``send`` would first wait for the
buffer to drain, which a client that does not read never lets happen, and the client would find the
keepalive's 1011 instead. A client that reads again finds every message before the close frame.

It relies on uvicorn's ``WebSocketsSansIOProtocol`` internals (``conn``, ``transport``, ``writable``,
``queue``, ``close_sent``, ``keepalive_timeout``), pinned by uv.lock; tests/integration/test_hostile_ws.py
checks both closes on the real server.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from hearth_read_models.live.subscribe_message import TOO_SLOW

PATH = "hearth_read_models.live.ws_protocol:SlowClientClosingProtocol"  # uvicorn's ``ws=``


class SlowClientClosingProtocol(WebSocketsSansIOProtocol):
    def keepalive_timeout(self) -> None:
        self.pong_timer = None
        self.pending_ping_payload = None
        if self.close_sent or self.transport.is_closing():
            return
        reason = f"too slow: no answer to a ping within {self.ping_timeout:g} s"
        self._close_now(TOO_SLOW, reason)
        self.transport.close()  # flushes what is buffered first, the close frame last

    async def send(self, message: Any) -> None:
        if (
            message["type"] == "websocket.close"
            and self.handshake_complete
            and not self.close_sent
            and not self.disconnected
            and not self.writable.is_set()
            and not self.transport.is_closing()
        ):
            self._close_now(message.get("code", 1000), message.get("reason", "") or "")
            self.close_timer = self.loop.call_later(self.close_timeout, self.transport.close)
            return
        await super().send(message)

    def _close_now(self, code: int, reason: str) -> None:
        """Queue the close frame behind what is buffered, and tell the application the client is gone."""
        self.queue.put_nowait({"type": "websocket.disconnect", "code": code, "reason": reason})
        self.conn.send_close(code, reason)
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = True
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
