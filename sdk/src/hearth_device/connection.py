"""A device's (or a hub's) connection to Hearth over MQTT, as ../shared/CONTRACT.md describes it.

``DeviceConnection(username=device_id, password=secret)`` is one device: it connects with the
credential Hearth issued, announces itself (``online``, retained, on every (re)connect) and leaves
``offline`` (retained) as its will, so Hearth marks it offline the moment the connection drops. It
reports state with an increasing ``seq``, receives commands and acknowledges them (an ack may carry the
state the command left: ``ack(command, report=...)``).

``DeviceConnection(username=hub_id, password=..., hub=True)`` is a hub (a Zigbee coordinator, the fleet
simulator): one connection acting for many child devices, each added with ``add_device``. MQTT gives a
connection one will, and it cannot name children added later, so the hub's will is about the hub:
``offline`` (retained) on ``hearth/hubs/{hub_id}/availability``, where it says ``online`` on every
(re)connect before its children's ``online``. Hearth, which knows the hub's children from the journal,
takes them offline when the hub's will (or its clean ``close``) says ``offline``.

``seq`` starts at the clock in milliseconds and grows by one per report, so it keeps increasing across
restarts of a device that reports less than a thousand times a second. Every publish is QoS 1 and
``report``/``ack`` return once the broker has the message. The session is persistent (client id = the
username unless given), so commands sent while the device was briefly away are delivered when it comes back; a
command can therefore arrive twice: ``Command.command_id`` tells, and acking it again is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal
from urllib.parse import urlsplit

from hearth_shared.adapters.mqtt_link import MqttLink
from hearth_shared.schema.events import JSON, MalformedRecord
from hearth_shared.schema.mqtt import (
    COMMANDS,
    ERRORS,
    OFFLINE,
    ONLINE,
    AckMessage,
    ErrorMessage,
    StateMessage,
    acks_topic,
    availability_topic,
    commands_topic,
    decode_command,
    decode_error,
    encode_message,
    errors_topic,
    hub_availability_topic,
    parse_topic,
    state_topic,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Command:
    """A command for one device (``device_id`` tells which, for a hub)."""

    device_id: str
    command_id: uuid.UUID
    name: str
    params: JSON
    expires_at: datetime


@dataclass(frozen=True)
class HearthError:
    """Hearth refused something a device published: ``error`` is the reason, ``reason`` the detail."""

    device_id: str
    error: str
    reason: str
    topic: str


class DeviceConnection:
    def __init__(
        self,
        *,
        username: str,
        password: str,
        host: str = "127.0.0.1",
        port: int = 1883,
        tls: ssl.SSLContext | None = None,
        hub: bool = False,
        client_id: str | None = None,
        keepalive_s: int = 30,
        backoff_s: float = 0.5,
        backoff_max_s: float = 30.0,
    ) -> None:
        self.username = username
        self.host, self.port, self.tls = host, port, tls
        self.hub = hub
        self.availability_topic = hub_availability_topic(username) if hub else availability_topic(username)
        self.link = MqttLink(
            client_id=client_id or username,
            username=username,
            password=password,
            keepalive_s=keepalive_s,
            will=(self.availability_topic, OFFLINE),
            backoff_s=backoff_s,
            backoff_max_s=backoff_max_s,
        )
        self.link.on_connected = self._announce
        self.link.route(self._dispatch)  # before connecting: a persistent session delivers at once
        self.commands: asyncio.Queue[Command] = asyncio.Queue()
        self.errors: asyncio.Queue[HearthError] = asyncio.Queue()
        self._seq: dict[str, int] = {}
        self._devices: list[str] = []

    @classmethod
    def at_url(
        cls, mqtt_url: str, *, username: str, password: str, cafile: str | None = None, hub: bool = False
    ) -> DeviceConnection:
        """A connection to the broker ``mqtt_url`` names (``mqtt://host:port``, or ``mqtts://`` with TLS):
        the ``mqtt_url`` of the credentials Hearth issued, which names the device's broker shard."""
        parsed = urlsplit(mqtt_url)
        if parsed.scheme not in ("mqtt", "mqtts") or not parsed.hostname:
            raise ValueError(f"{mqtt_url!r} is not an mqtt:// or mqtts:// URL")
        secure = parsed.scheme == "mqtts"
        tls = tls_context(cafile) if secure else None
        port = parsed.port or (8883 if secure else 1883)
        return cls(username=username, password=password, host=parsed.hostname, port=port, tls=tls, hub=hub)

    # ------------------------------------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        """Connect (raises gmqtt's ``MQTTConnectError`` if the broker refuses the credential)."""
        await self.link.connect(self.host, self.port, ssl=self.tls or False)
        if not self.hub:
            self.add_device(self.username)

    async def close(self, *, offline: bool = True) -> None:
        """Say ``offline`` (unless told not to) and disconnect: a device for itself, a hub for itself (what
        its will would say: Hearth takes its children offline)."""
        if offline and self.link.client.is_connected:
            sent = self.link.publish(self.availability_topic, OFFLINE, retain=True)
            with contextlib.suppress(TimeoutError):  # disconnect all the same
                await asyncio.wait_for(sent, 10)
        await self.link.disconnect()

    async def __aenter__(self) -> DeviceConnection:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def add_device(self, device_id: str) -> None:
        """Act for ``device_id`` too (a hub's child): take its commands and errors, say it is online."""
        if device_id in self._seq:
            return
        if not self.link.connected.is_set():
            raise RuntimeError("connect() first, then add devices")
        self._seq[device_id] = int(time.time() * 1000)
        self._devices.append(device_id)
        self.link.subscribe(commands_topic(device_id))
        self.link.subscribe(errors_topic(device_id))
        self.link.publish(availability_topic(device_id), ONLINE, retain=True)

    @property
    def devices(self) -> list[str]:
        return list(self._devices)

    # ---------------------------------------------------------------------------------- what it says

    async def report(
        self, state: JSON, *, device_id: str | None = None, at: datetime | None = None, seq: int | None = None
    ) -> int:
        """Report state (the keys that changed, or all); returns the seq used once the broker has it."""
        device_id = device_id or self.username
        if seq is None:
            seq = self._seq[device_id] = self._seq[device_id] + 1
        message = StateMessage(seq=seq, at=at or datetime.now(UTC), state=state)
        await self.link.publish(state_topic(device_id), encode_message(message))
        return seq

    async def ack(
        self,
        command: Command,
        *,
        ok: bool = True,
        reason: str = "",
        report: JSON | None = None,
        at: datetime | None = None,
    ) -> int | None:
        """Tell Hearth the command was carried out (``ok``) or could not be (a short ``reason``).

        ``report``: the state the command left (the keys it changed, or all), sent in the ack under the
        device's next seq, as ``report`` would. Hearth puts it on the command lane with the ack, so the
        command converges without waiting behind telemetry: give it whenever the command changed state.
        Returns the report's seq (None without one) once the broker has the ack."""
        seq = None
        state = None
        if report is not None:
            seq = self._seq[command.device_id] = self._seq[command.device_id] + 1
            state = StateMessage(seq=seq, at=at or datetime.now(UTC), state=report)
        result: Literal["ok", "failed"] = "ok" if ok else "failed"
        message = AckMessage(command_id=command.command_id, result=result, reason=reason, report=state)
        await self.link.publish(acks_topic(command.device_id), encode_message(message))
        return seq

    async def publish_raw(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        """Publish anything (tests of what Hearth refuses; returns once the broker has it)."""
        await self.link.publish(topic, payload, retain=retain)

    async def next_command(self, timeout_s: float = 30.0) -> Command:
        return await asyncio.wait_for(self.commands.get(), timeout_s)

    async def next_error(self, timeout_s: float = 30.0) -> HearthError:
        return await asyncio.wait_for(self.errors.get(), timeout_s)

    # ----------------------------------------------------------------------------------- what it hears

    def _announce(self) -> None:
        """Birth on every (re)connect: a hub is online, then each device is (retained)."""
        if self.hub:
            self.link.publish(self.availability_topic, ONLINE, retain=True)
        for device_id in self._devices:
            self.link.publish(availability_topic(device_id), ONLINE, retain=True)

    async def _dispatch(self, topic: str, payload: bytes) -> None:
        if topic.endswith(f"/{COMMANDS}"):
            await self._on_command(topic, payload)
        elif topic.endswith(f"/{ERRORS}"):
            await self._on_error(topic, payload)

    async def _on_command(self, topic: str, payload: bytes) -> None:
        try:
            device_id = parse_topic(topic).device_id
            message = decode_command(payload)
        except MalformedRecord as error:
            log.warning("device SDK: ignoring a command on %s: %s", topic, error)
            return
        self.commands.put_nowait(
            Command(
                device_id=device_id,
                command_id=message.command_id,
                name=message.name,
                params=message.params,
                expires_at=message.expires_at,
            )
        )

    async def _on_error(self, topic: str, payload: bytes) -> None:
        try:
            device_id = parse_topic(topic).device_id
            message: ErrorMessage = decode_error(payload)
        except MalformedRecord as error:
            log.warning("device SDK: ignoring an error message on %s: %s", topic, error)
            return
        log.warning("device SDK: Hearth refused %s: %s (%s)", message.topic, message.error, message.reason)
        self.errors.put_nowait(HearthError(device_id, message.error, message.reason, message.topic))


def tls_context(cafile: str | None = None) -> ssl.SSLContext:
    """A TLS context that trusts ``cafile`` (the local stack's self-signed certificate) or the system CAs."""
    return ssl.create_default_context(cafile=cafile)


__all__ = ["Command", "DeviceConnection", "HearthError", "tls_context"]
