"""The MQTT device protocol (../shared/CONTRACT.md, "Devices connect over MQTT"): topics and payloads.

Every device topic is ``hearth/devices/{device_id}/{channel}``:

* ``state`` (device -> Hearth, QoS 1): ``{"seq", "at", "state"}``
* ``acks`` (device -> Hearth, QoS 1): ``{"command_id", "result": "ok" | "failed", "reason"?, "report"?}``,
  where ``report`` (Hearth's addition to the contract) is the device's state after it applied the command,
  a ``state`` payload: it travels with the ack, so the command's convergence does not wait behind telemetry
* ``availability`` (device -> Hearth, retained): ``online`` on connect, ``offline`` as the will
* ``commands`` (Hearth -> device, QoS 1): ``{"command_id", "name", "params", "expires_at"}``
* ``errors`` (Hearth -> device): ``{"error", "reason", "topic"}`` for a payload Hearth refused

A hub (one connection acting for many child devices: the fleet simulator) also has
``hearth/hubs/{hub}/availability`` (retained): ``online`` on connect, ``offline`` as its will. MQTT gives a
connection one will, so a hub's will cannot name its children; the broker-access follower, which knows
them from the journal, publishes ``offline`` on each child's ``availability`` when the hub's says
``offline`` (hearth_device_gateway.service.availability_keeper). And ``hearth/hubs/{hub}/devices/{device_id}``
(retained ``allowed``), published by that follower once the broker lets the hub act for the device: a hub
acts for a child only after it (Debian's Mosquitto 2.0.11 drops a connection on any publish its ACL
denies, so a hub that published for a device registered a moment ago, before the broker had reloaded its
ACL, lost its connection: measured).

The decoders here are the edge: they check the payload's shape, the device id (``hearth_shared.schema.ids``),
free text and numbers that a consumer behind the edge could not store, and the size; anything they refuse
raises ``MalformedRecord`` with a short machine-readable reason, which the gateway puts on the dead-letter
topic and in the ``errors`` message it sends back to the device. Pure: no MQTT library is imported here.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Final, Literal

import msgspec

from hearth_shared.schema.events import JSON, MalformedRecord
from hearth_shared.schema.ids import find_unstorable, has_control_characters, is_identifier

TOPIC_ROOT: Final = "hearth/devices"
HUB_ROOT: Final = "hearth/hubs"
STATE: Final = "state"
ACKS: Final = "acks"
AVAILABILITY: Final = "availability"
COMMANDS: Final = "commands"
ERRORS: Final = "errors"
DEVICE_CHANNELS: Final = frozenset({STATE, ACKS, AVAILABILITY})  # device -> Hearth
HEARTH_CHANNELS: Final = frozenset({COMMANDS, ERRORS})  # Hearth -> device

ONLINE: Final = b"online"
OFFLINE: Final = b"offline"
ALLOWED: Final = b"allowed"

# Where the broker-access follower learns that the broker has applied a reload: it publishes
# ``{RELOADS_ROOT}/{mark}`` to itself, and the broker delivers it only once the ACL that grants reading that
# topic (the new one) is in force. Outside ``hearth/#``, which the gateway account may read whole.
RELOADS_ROOT: Final = "hearth-access/reloaded"

# The broker's service accounts (hearth_devstack.servers.mosquitto). The leading underscore keeps them apart
# from every device id (hearth_shared.schema.ids: an id starts with a letter or digit), since a device's
# username is its id.
GATEWAY_ACCOUNT: Final = "_hearth_gateway"  # Hearth's own components: every device topic
SIMULATOR_ACCOUNT: Final = "_hearth_simulator"  # the simulator hub: only devices registered as simulated

# The broker's default ports: devices (plain, TLS) and the platform's own components (service accounts
# only; see hearth_devstack.servers.mosquitto for why they have a listener of their own).
DEVICE_PORT: Final = 1883
DEVICE_TLS_PORT: Final = 8883
PLATFORM_PORT: Final = 1884

MAX_PAYLOAD_BYTES: Final = 16 * 1024  # a state report is a few hundred bytes; this leaves room
MAX_STATE_KEYS: Final = 64
MAX_REASON_CHARS: Final = 200


def topic(device_id: str, channel: str) -> str:
    """``hearth/devices/{device_id}/{channel}``."""
    return f"{TOPIC_ROOT}/{device_id}/{channel}"


def hub_availability_topic(hub: str) -> str:
    """``hearth/hubs/{hub}/availability``: a hub's own ``online``/``offline`` (its will), for its children."""
    return f"{HUB_ROOT}/{hub}/{AVAILABILITY}"


def hub_child_topic(hub: str, device_id: str) -> str:
    """``hearth/hubs/{hub}/devices/{device_id}``: retained ``allowed`` once the broker lets ``hub`` act for
    the device (a hub subscribes to ``hub_child_topic(hub, "+")``)."""
    return f"{HUB_ROOT}/{hub}/devices/{device_id}"


def state_topic(device_id: str) -> str:
    return topic(device_id, STATE)


def acks_topic(device_id: str) -> str:
    return topic(device_id, ACKS)


def availability_topic(device_id: str) -> str:
    return topic(device_id, AVAILABILITY)


def commands_topic(device_id: str) -> str:
    return topic(device_id, COMMANDS)


def errors_topic(device_id: str) -> str:
    return topic(device_id, ERRORS)


def wildcard(channel: str) -> str:
    """Every device's ``channel``: ``hearth/devices/+/{channel}``."""
    return f"{TOPIC_ROOT}/+/{channel}"


def shared_subscription(group: str, channel: str) -> str:
    """An MQTT 5 shared subscription to every device's ``channel``: each message goes to one member of
    ``group`` (the gateway processes share the work this way)."""
    return f"$share/{group}/{wildcard(channel)}"


class DeviceTopic(msgspec.Struct, frozen=True, kw_only=True):
    device_id: str
    channel: str


def parse_topic(name: str) -> DeviceTopic:
    """Split ``hearth/devices/{device_id}/{channel}``; raises ``MalformedRecord`` for anything else."""
    parts = name.split("/")
    if len(parts) != 4 or f"{parts[0]}/{parts[1]}" != TOPIC_ROOT:
        raise MalformedRecord("unknown_topic", f"{name!r} is not {TOPIC_ROOT}/<device_id>/<channel>")
    device_id, channel = parts[2], parts[3]
    if not is_identifier(device_id):
        raise MalformedRecord("invalid_device_id", f"{device_id!r} is not a valid device id")
    if channel not in DEVICE_CHANNELS and channel not in HEARTH_CHANNELS:
        raise MalformedRecord("unknown_topic", f"channel {channel!r} is not one of the device topics")
    return DeviceTopic(device_id=device_id, channel=channel)


# ---------------------------------------------------------------------------------------------- payloads


class StateMessage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A state report: ``seq`` increases per device; ``at`` is the device's clock (ISO-8601 with zone)."""

    seq: int
    at: datetime
    state: JSON


class AckMessage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """The device's answer to a command: it did it (``ok``) or could not (``failed`` with a reason)."""

    command_id: uuid.UUID
    result: Literal["ok", "failed"]
    reason: str = ""
    report: StateMessage | None = None  # the state the command left (checked apart: ``decode_ack``)


class _AckPayload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An ``acks`` payload as read: the report kept as JSON, so a bad one does not make the ack bad."""

    command_id: uuid.UUID
    result: Literal["ok", "failed"]
    reason: str = ""
    report: msgspec.Raw = msgspec.Raw()


class CommandMessage(msgspec.Struct, frozen=True, kw_only=True):
    """A command for the device (QoS 1, so a device may see it twice: ``command_id`` tells)."""

    command_id: uuid.UUID
    name: str
    params: JSON
    expires_at: datetime


class ErrorMessage(msgspec.Struct, frozen=True, kw_only=True):
    """What Hearth tells a device whose payload it refused: ``error`` is the machine-readable reason,
    ``reason`` the human detail, ``topic`` where the payload was published."""

    error: str
    reason: str
    topic: str


_state_decoder = msgspec.json.Decoder(StateMessage)
_ack_decoder = msgspec.json.Decoder(_AckPayload)
_command_decoder = msgspec.json.Decoder(CommandMessage)
_error_decoder = msgspec.json.Decoder(ErrorMessage)
_encoder = msgspec.json.Encoder()


def encode_message(message: StateMessage | AckMessage | CommandMessage | ErrorMessage) -> bytes:
    return _encoder.encode(message)


def _decode(decoder: msgspec.json.Decoder[Any], data: bytes, what: str) -> Any:
    if len(data) > MAX_PAYLOAD_BYTES:
        raise MalformedRecord("payload_too_large", f"{len(data)} bytes; at most {MAX_PAYLOAD_BYTES}")
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:  # a subclass of DecodeError: test it first
        raise MalformedRecord("invalid_fields", f"{what}: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise MalformedRecord("invalid_json", f"{what}: {exc}") from exc


def decode_state(data: bytes) -> StateMessage:
    """A ``state`` payload, checked: a non-negative seq, a device time with a zone, a non-empty object of
    at most ``MAX_STATE_KEYS`` keys with no control characters and no non-finite numbers."""
    message: StateMessage = _decode(_state_decoder, data, "state")
    if message.seq < 0 or message.seq >= 1 << 63:
        raise MalformedRecord("invalid_fields", f"state: seq {message.seq} is out of range")
    if message.at.tzinfo is None:
        raise MalformedRecord("invalid_fields", "state: `at` must carry a UTC offset")
    if not message.state:
        raise MalformedRecord("invalid_fields", "state: `state` is empty")
    if len(message.state) > MAX_STATE_KEYS:
        raise MalformedRecord("invalid_fields", f"state: more than {MAX_STATE_KEYS} keys")
    where = find_unstorable(message.state)
    if where is not None:
        raise MalformedRecord("unstorable_value", f"state.{where}: control characters or non-finite number")
    return message


def decode_ack(data: bytes) -> tuple[AckMessage, bytes | None]:
    """An ``acks`` payload, checked: a one-line reason of at most ``MAX_REASON_CHARS`` characters. Returns
    the ack (``report`` left out) and its report's JSON if it carries one (``null`` is none), for
    ``decode_state``: a report Hearth refuses is refused apart, the ack it came with still counts."""
    message: _AckPayload = _decode(_ack_decoder, data, "ack")
    if len(message.reason) > MAX_REASON_CHARS or has_control_characters(message.reason):
        raise MalformedRecord("invalid_fields", "ack: `reason` is too long or has control characters")
    ack = AckMessage(command_id=message.command_id, result=message.result, reason=message.reason)
    report = bytes(message.report)
    return ack, report if report and report != b"null" else None


def decode_availability(data: bytes) -> bool:
    """An ``availability`` payload: True for ``online``, False for ``offline`` (nothing else)."""
    payload = data.strip()
    if payload == ONLINE:
        return True
    if payload == OFFLINE:
        return False
    raise MalformedRecord("invalid_availability", f"expected 'online' or 'offline', got {data[:40]!r}")


def decode_command(data: bytes) -> CommandMessage:
    """A ``commands`` payload (what a device SDK reads)."""
    message: CommandMessage = _decode(_command_decoder, data, "command")
    return message


def decode_error(data: bytes) -> ErrorMessage:
    """An ``errors`` payload (what a device SDK reads)."""
    message: ErrorMessage = _decode(_error_decoder, data, "error")
    return message
