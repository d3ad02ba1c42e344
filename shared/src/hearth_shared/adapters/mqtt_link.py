"""The MQTT adapter (gmqtt) of the device gateway and the device SDK: one MQTT 5 connection that
acknowledges a message only when its handler returns, and gives a future per QoS 1 publish that
resolves when the broker acknowledges it.

Why gmqtt: it is asyncio-native (the gateway's Kafka side is aiokafka on the same loop, no thread) and
parses packets from a buffered protocol; with ``optimistic_acknowledgement=False`` it sends a message's
PUBACK only when the async ``on_message`` returns, which is what "acknowledge only after the inbox has it"
needs. Measured here (load 6): about 24,000 QoS 1 messages/s into one such subscriber, 27,000 with
immediate acknowledgement. paho-mqtt reads each packet with several one-byte socket reads.

With ``persistent=True`` the session outlives the connection (clean start off, ``session_expiry_s``)
under a fixed client id: what the broker handed to a client that died before acknowledging it stays in
that session and is delivered again when the same client id comes back.

Outgoing QoS 1 messages: gmqtt keeps each unacknowledged PUBLISH in its storage and resends it after a
reconnect; ``ConfirmingStorage`` is that storage plus a future per message id, resolved by the PUBACK
(gmqtt removes the message from storage then), or failed with ``SessionLost`` if gmqtt drops its storage.

The gateway's links take their messages in batches instead (``route_batches``, mqtt_batches.py): one
task and one write of PUBACKs per read of the socket, not per message. That hooks gmqtt's PUBLISH
handlers (``_handle_publish_packet``, parsed leaner for the usual packet, and
``_handle_qos_1_publish_packet``, which has the packet id the PUBACK needs; gmqtt 0.8.0 is pinned) and
writes the PUBACKs on gmqtt's connection itself.

Reconnects: gmqtt reconnects by itself; ``backoff`` doubles its delay after every lost connection (with
jitter, up to ``backoff_max_s``) and starts again from ``backoff_s`` after a connection that lasted
``STEADY_S``. Not at every CONNACK: a broker that takes the connection and drops it at once (a birth or
will topic the credential may not publish to, measured with Mosquitto 2.0: dropped right after the
PUBACK that refuses it) would otherwise have the client back about once a second for as long as it
runs. Subscriptions are renewed and
``on_connected`` runs (e.g. a device's birth message) after every CONNACK.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from time import monotonic
from typing import Any

from gmqtt import Client, Message
from gmqtt.mqtt.constants import MQTTv50
from gmqtt.storage import PersistentStorage

from hearth_shared.adapters.mqtt_batches import BatchedDelivery, BatchHandler

log = logging.getLogger(__name__)

MessageHandler = Callable[[str, bytes], Awaitable[None]]
STEADY_S = 10.0  # a connection that lasted this long was a good one: the next reconnect is quick again


class SessionLost(ConnectionError):
    """The client's unacknowledged messages were dropped (the broker started a new session)."""


class ConfirmingStorage(PersistentStorage):  # type: ignore[misc]
    def __init__(self, on_settled: Callable[[int], None]) -> None:
        super().__init__()
        self.last_mid = 0
        self._waiters: dict[int, asyncio.Future[None]] = {}
        self._on_settled = on_settled  # told how many expected messages were acknowledged or dropped

    def push_message(self, mid: int, raw_package: bytes) -> None:
        super().push_message(mid, raw_package)
        self.last_mid = mid

    def expect(self, mid: int) -> asyncio.Future[None]:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[mid] = waiter
        return waiter

    def remove_message_by_mid(self, mid: int) -> None:
        super().remove_message_by_mid(mid)
        waiter = self._waiters.pop(mid, None)
        if waiter is not None:
            if not waiter.done():
                waiter.set_result(None)
            self._on_settled(1)

    def clear(self) -> None:
        super().clear()
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            if not waiter.done():
                waiter.set_exception(SessionLost("unacknowledged messages dropped with the MQTT session"))
        self._on_settled(len(waiters))


class MqttLink:
    """One MQTT 5 connection: subscriptions with a handler that acknowledges when it returns; QoS 1
    publishes with a future for the broker's acknowledgement."""

    def __init__(
        self,
        *,
        client_id: str,
        username: str,
        password: str,
        keepalive_s: int = 30,
        persistent: bool = True,
        session_expiry_s: int = 3600,
        receive_maximum: int = 1000,
        will: tuple[str, bytes] | None = None,  # (topic, payload), published retained at QoS 1
        backoff_s: float = 0.5,
        backoff_max_s: float = 30.0,
        max_in_flight: int = 1000,
    ) -> None:
        self.storage = ConfirmingStorage(self._settled)
        self.max_in_flight = max_in_flight
        self._in_flight = 0
        self._outbox: deque[_Op] = deque()  # publishes and (un)subscribes waiting for a packet id
        will_message = Message(will[0], will[1], qos=1, retain=True) if will else None
        self.client = Client(
            client_id,
            clean_session=not persistent,
            optimistic_acknowledgement=False,
            persistent_storage=self.storage,
            will_message=will_message,
            session_expiry_interval=session_expiry_s if persistent else 0,
            receive_maximum=receive_maximum,
        )
        self.client.set_auth_credentials(username, password)
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self.client.set_config({"reconnect_retries": -1, "reconnect_delay": backoff_s})
        self.keepalive_s = keepalive_s
        self.on_connected: Callable[[], None] | None = None
        self._handlers: dict[str, MessageHandler | None] = {}  # by topic filter (None: the route)
        self._route: MessageHandler | None = None
        self.batches: BatchedDelivery | None = None  # see route_batches
        self._own_handlers: dict[str, MessageHandler] = {}  # the subscriptions that have one
        self.connected = asyncio.Event()
        self._closing = False
        self._connected_at: float | None = None  # monotonic() at the last CONNACK
        self._acked: dict[int, _Op] = {}  # (un)subscribes sent, by packet id, until their SUBACK/UNSUBACK
        self._subscriptions: list[asyncio.Future[None]] = []
        self.client.on_message = self._on_message
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_unsubscribe = self._on_unsubscribe

    async def connect(self, host: str, port: int, *, ssl: Any = False) -> None:
        """Connect (raises if the broker refuses, e.g. a wrong password: gmqtt's MQTTConnectError)."""
        await self.client.connect(host, port, ssl=ssl, keepalive=self.keepalive_s, version=MQTTv50)

    async def disconnect(self, *, end_session: bool = False) -> None:
        """Disconnect (no will is published); ``end_session`` also ends a persistent session. The batches
        under way are settled first (their PUBACKs written)."""
        self._closing = True
        if self.batches is not None:
            await self.batches.settled()
        if self.client.is_connected:
            if end_session:
                await self.client.disconnect(session_expiry_interval=0)
            else:
                await self.client.disconnect()

    def route(self, handler: MessageHandler) -> None:
        """Messages no subscription's own handler takes go to ``handler``. Set it before ``connect``: a
        persistent session's messages arrive right after the CONNACK."""
        self._route = handler

    def route_batches(self, handler: BatchHandler) -> None:
        """Every message of this connection goes to ``handler``, in batches (mqtt_batches.py): a batch's
        PUBACKs are written together once the handler returned, none if it raised. Set it before
        ``connect``; such a link takes no per-subscription handlers."""
        if self._own_handlers:
            raise ValueError("a link with batches takes no per-subscription handlers")
        self.batches = batches = BatchedDelivery(handler, self._connection, _write)
        package_handler = self.client._package_handler
        own_parse = package_handler._handle_publish_packet
        package_handler._handle_publish_packet = partial(_gather_publish, batches, own_parse)
        package_handler._handle_qos_1_publish_packet = partial(_gather_qos_1, batches)
        self.client.on_message = partial(_gather_qos_0, batches)  # a plain function: called at once

    def _connection(self) -> Any:
        return self.client._connection

    def subscribe(self, topic_filter: str, handler: MessageHandler | None = None) -> None:
        """Messages on ``topic_filter`` go to ``handler`` (or the ``route`` handler); each PUBACK is sent
        when the handler returns. A handler that raises leaves its message unacknowledged (the broker
        delivers it again on the next connection of a persistent session)."""
        self._handlers[topic_filter] = handler
        if handler is not None:
            if self.batches is not None:
                raise ValueError("a link with batches takes no per-subscription handlers")
            self._own_handlers[topic_filter] = handler
        self._subscriptions.append(self._queue(_Op("subscribe", topic_filter)))

    async def subscribed(self, timeout_s: float = 30.0) -> None:
        """Wait until the broker has granted every subscription made so far, and those renewed after the
        last reconnect (a subscription it refuses, e.g. while its ACL does not allow it yet, is asked for
        again every second). Until then a message published to the topic may find no subscriber."""
        pending, self._subscriptions = self._subscriptions, []
        await asyncio.wait_for(asyncio.gather(*pending), timeout_s)

    def unsubscribe(self, topic_filter: str) -> asyncio.Future[None]:
        self._handlers.pop(topic_filter, None)
        self._own_handlers.pop(topic_filter, None)
        return self._queue(_Op("unsubscribe", topic_filter))

    def _on_subscribe(self, _client: Client, mid: int, granted: Any, _props: Any) -> None:
        op = self._acked.pop(mid, None)
        if op is None:
            return
        # gmqtt frees the packet id only after this callback returns: settle (and pump) after that.
        asyncio.get_running_loop().call_soon(self._settled, 1)
        if any(code >= 0x80 for code in granted or ()) and op.topic in self._handlers:
            log.warning("MQTT subscription to %s refused (%s); asking again in 1 s", op.topic, granted)
            asyncio.get_running_loop().call_later(1.0, self._retry, op)
        elif not op.done.done():
            op.done.set_result(None)

    def _on_unsubscribe(self, _client: Client, mid: int, *_: Any) -> None:
        op = self._acked.pop(mid, None)
        if op is not None:
            asyncio.get_running_loop().call_soon(self._settled, 1)  # after gmqtt frees the id
            if not op.done.done():
                op.done.set_result(None)

    def _retry(self, op: _Op) -> None:
        self._outbox.append(op)
        self._pump()

    def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> asyncio.Future[None]:
        """Publish at QoS 1; the future resolves when the broker has acknowledged it.

        At most ``window`` messages are unacknowledged at a time (the broker's receive maximum from its
        CONNACK, which gmqtt enforces by refusing to allocate more ids); the rest wait here, in order,
        also while the connection is down."""
        return self._queue(_Op("publish", topic, payload, retain))

    def _queue(self, op: _Op) -> asyncio.Future[None]:
        self._outbox.append(op)
        self._pump()
        return op.done

    @property
    def state(self) -> str:
        """How the link stands, for a failure's story: connected, requests waiting, publishes in flight."""
        waiting, in_flight = len(self._outbox), self._in_flight
        return f"connected {self.client.is_connected}, {waiting} waiting, {in_flight} in flight"

    @property
    def window(self) -> int:
        # gmqtt lowers its id pool to the broker's receive maximum (and refuses an id past it).
        broker_max: int = self.client._package_handler.id_generator._max
        return max(1, min(self.max_in_flight, broker_max - 2))

    def _pump(self) -> None:
        if not self.client.is_connected:
            return  # _on_connect pumps again
        window = self.window
        while self._outbox and self._in_flight < window:
            op = self._outbox.popleft()
            try:
                if op.kind == "publish":
                    self.client.publish(op.topic, op.payload, qos=1, retain=op.retain)
                    self.storage.expect(self.storage.last_mid).add_done_callback(partial(_settle, op.done))
                elif op.kind == "subscribe":
                    self._acked[self.client.subscribe(op.topic, qos=1)] = op
                else:
                    self._acked[self.client.unsubscribe(op.topic)] = op
            except OverflowError:  # no packet id free after all: wait for the next acknowledgement
                self._outbox.appendleft(op)
                return
            self._in_flight += 1

    def _settled(self, count: int) -> None:
        self._in_flight = max(0, self._in_flight - count)
        if self._outbox:
            self._pump()

    async def _on_message(self, _client: Client, topic: str, payload: bytes, _qos: int, _props: Any) -> int:
        handler = self._handlers.get(topic)
        if handler is None and self._own_handlers:  # a subscription's own handler first (few have one)
            handler = next((h for f, h in self._own_handlers.items() if _matches(f, topic)), None)
        if handler is None:  # then the route (the gateway's hot path has only the route)
            handler = self._route
        if handler is None:
            # Never acknowledge what nobody took (a persistent session delivers right after CONNACK:
            # set handlers before connecting). Unacknowledged, it comes again on the next connection.
            log.error("MQTT message on %s with no handler: left unacknowledged", topic)
            raise LookupError(f"no handler for {topic}")
        await handler(topic, payload)
        return 0  # PUBACK: success

    def _on_connect(self, _client: Client, _flags: Any, _rc: int, _props: Any) -> None:
        self._connected_at = monotonic()
        if not self.connected.is_set():
            self.connected.set()
        else:  # a reconnect: what was sent and not acknowledged is gone (gmqtt resends publishes only)
            lost, self._acked = list(self._acked.values()), {}
            self._in_flight = max(0, self._in_flight - len(lost))
            self._outbox.extendleft(reversed([op for op in lost if op.kind == "subscribe"]))
            # (what nobody awaited and is granted is dropped here: the list stays as long as the filters)
            self._subscriptions = [s for s in self._subscriptions if not s.done()]
            for topic_filter in self._handlers:  # and the session may be new: subscribe again
                renewal = _Op("subscribe", topic_filter)
                self._outbox.append(renewal)
                self._subscriptions.append(renewal.done)
        if self.on_connected is not None:
            self.on_connected()
        asyncio.get_running_loop().call_soon(self._pump)  # once gmqtt counts itself connected

    def _on_disconnect(self, _client: Client, _packet: Any, exc: BaseException | None = None) -> None:
        if self._closing:
            return
        connected_at, self._connected_at = self._connected_at, None
        if connected_at is not None and monotonic() - connected_at >= STEADY_S:
            self.client.reconnect_delay = self.backoff_s
        delay = min(self.client.reconnect_delay * 2, self.backoff_max_s)
        self.client.reconnect_delay = delay * random.uniform(0.8, 1.2)
        log.warning("MQTT connection lost (%s); reconnecting in %.1f s", exc, self.client.reconnect_delay)


class _Op:
    """One packet waiting for an id: a QoS 1 publish, a subscribe or an unsubscribe."""

    __slots__ = ("done", "kind", "payload", "retain", "topic")

    def __init__(self, kind: str, topic: str, payload: bytes = b"", retain: bool = False) -> None:
        self.kind, self.topic, self.payload, self.retain = kind, topic, payload, retain
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()


def _settle(done: asyncio.Future[None], acknowledged: asyncio.Future[None]) -> None:
    if done.done():
        return
    if acknowledged.exception() is not None:
        done.set_exception(acknowledged.exception())  # type: ignore[arg-type]
    else:
        done.set_result(None)


def _gather_publish(
    batches: BatchedDelivery, own_parse: Callable[[int, bytes], None], header: int, body: bytes
) -> None:
    """A PUBLISH packet's body as gmqtt parses it, for the usual one (QoS 0 or 1, no properties) without
    gmqtt's per-packet struct formats, property dict and debug line (a fifth of the gateway's time in a
    profile); anything else (QoS 2, properties such as a topic alias) goes to gmqtt's own parse."""
    qos = (header >> 1) & 0x03
    topic_end = 2 + ((body[0] << 8) | body[1])
    properties_at = topic_end + 2 if qos else topic_end
    if qos > 1 or len(body) <= properties_at or body[properties_at] != 0 or topic_end == 2:
        own_parse(header, body)
        return
    try:
        topic = body[2:topic_end].decode()
    except UnicodeDecodeError:
        own_parse(header, body)
        return
    mid = ((body[topic_end] << 8) | body[topic_end + 1]) if qos else None
    batches.add(mid, topic, body[properties_at + 1 :])


def _gather_qos_1(batches: BatchedDelivery, mid: int, payload: bytes, topic: str, _props: Any) -> None:
    batches.add(mid, topic, payload)


def _gather_qos_0(batches: BatchedDelivery, _client: Any, topic: str, payload: bytes, *_: Any) -> None:
    batches.add(None, topic, payload)


def _write(connection: Any, data: bytes) -> None:
    if not connection.is_closing():
        connection.send_package(data)


def _matches(pattern: str, topic: str) -> bool:
    """MQTT topic-filter matching (``+`` one level, ``#`` the rest; ``$share/<group>/`` ignored)."""
    if pattern.startswith("$share/"):
        pattern = pattern.split("/", 2)[2]
    want, got = pattern.split("/"), topic.split("/")
    for i, level in enumerate(want):
        if level == "#":
            return True
        if i >= len(got) or (level != "+" and level != got[i]):
            return False
    return len(want) == len(got)
