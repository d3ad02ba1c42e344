"""The few MQTT 5 packets the gateway bench's load speaks itself, built and split by hand (pure: bytes in,
bytes out).

Why by hand: the bench's publishers and its floor's subscriber must cost the machine as little as
possible, so that the broker (and then the gateway) is what is measured, not them. A client library
spends tens of microseconds per message (a task, a future and a socket write each: gmqtt); these
packets are built once before the run, written many at a time, and the replies read a buffer at a time
(`mqtt_load`). Only what they need: CONNECT with a username, password and receive maximum, CONNACK's
reason and receive maximum, SUBSCRIBE at QoS 1, PUBLISH at QoS 1 without properties, PUBACK (success).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

CONNECT, CONNACK, PUBLISH, PUBACK, SUBSCRIBE, SUBACK = 0x10, 0x20, 0x30, 0x40, 0x82, 0x90
RECEIVE_MAXIMUM = 0x21  # the property id
DEFAULT_RECEIVE_MAXIMUM = 65535  # when the CONNACK does not say (MQTT 5, 3.2.2.3.3)

# Property ids by the size of their value, to skip the ones a CONNACK may carry besides.
_ONE_BYTE = {0x01, 0x17, 0x19, 0x24, 0x25, 0x28, 0x29, 0x2A}
_TWO_BYTES = {0x13, 0x21, 0x22, 0x23}
_FOUR_BYTES = {0x02, 0x11, 0x18, 0x27}
_VARINT = {0x0B}
_LENGTH_PREFIXED = {0x03, 0x08, 0x09, 0x12, 0x15, 0x16, 0x1A, 0x1C, 0x1F}  # strings, binary data
_PAIR = {0x26}  # user property: two strings


def varint(n: int) -> bytes:
    """MQTT's variable byte integer."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _string(data: bytes) -> bytes:
    return struct.pack("!H", len(data)) + data


def _packet(header: int, body: bytes) -> bytes:
    return bytes([header]) + varint(len(body)) + body


def connect(
    client_id: str,
    username: str,
    password: str,
    *,
    receive_maximum: int,
    will: tuple[str, bytes] | None = None,
) -> bytes:
    """CONNECT, MQTT 5, clean start, no keepalive (the bench's connections live for one run); with
    ``will`` (topic, payload), a will at QoS 1, retained, as the SDK's devices set on ``availability``."""
    properties = bytes([RECEIVE_MAXIMUM]) + struct.pack("!H", receive_maximum)
    flags = 0x80 | 0x40 | 0x02  # username, password, clean start
    if will is not None:
        flags |= 0x04 | 0x08 | 0x20  # will, will QoS 1, will retain
    variable = _string(b"MQTT") + bytes([5, flags]) + struct.pack("!H", 0)
    variable += varint(len(properties)) + properties
    payload = _string(client_id.encode())
    if will is not None:
        payload += b"\x00" + _string(will[0].encode()) + _string(will[1])  # no will properties
    payload += _string(username.encode()) + _string(password.encode())
    return _packet(CONNECT, variable + payload)


def subscribe(packet_id: int, topic_filter: str) -> bytes:
    """SUBSCRIBE to one filter at QoS 1."""
    return _packet(
        SUBSCRIBE, struct.pack("!H", packet_id) + b"\x00" + _string(topic_filter.encode()) + b"\x01"
    )


def publish(topic: str, payload: bytes, packet_id: int, *, retain: bool = False) -> bytes:
    """PUBLISH at QoS 1, no properties (``retain``: the broker keeps it for later subscribers)."""
    header = PUBLISH | 0x02 | (0x01 if retain else 0)
    return _packet(header, _string(topic.encode()) + struct.pack("!H", packet_id) + b"\x00" + payload)


def pubacks(packet_ids: list[int]) -> bytes:
    """The PUBACKs (success, reason code left out) of ``packet_ids``, in order, as one buffer."""
    return struct.pack(f"!{len(packet_ids)}I", *[0x40020000 | i for i in packet_ids])


def split(buffer: bytes | bytearray, start: int = 0) -> Iterator[tuple[int, int, int]]:
    """The whole packets in ``buffer`` from ``start``: (first byte, where the body starts, where it ends).
    A packet cut off at the end is left for the next read (the caller keeps ``buffer[last end:]``)."""
    end = len(buffer)
    at = start
    while at + 2 <= end:
        length, shift, i = 0, 0, at + 1
        while True:
            if i >= end:
                return
            byte = buffer[i]
            length |= (byte & 0x7F) << shift
            i += 1
            if not byte & 0x80:
                break
            shift += 7
        if i + length > end:
            return
        yield buffer[at], i, i + length
        at = i + length


def connack(body: bytes) -> tuple[int, int]:
    """A CONNACK's reason code and the broker's receive maximum (how many QoS 1 PUBLISHes a client may
    have unacknowledged)."""
    reason = body[1]
    receive_maximum = DEFAULT_RECEIVE_MAXIMUM
    if len(body) > 2:
        length, i = _read_varint(body, 2)
        stop = i + length
        while i < stop:
            prop = body[i]
            i += 1
            if prop == RECEIVE_MAXIMUM:
                receive_maximum = struct.unpack_from("!H", body, i)[0]
            i += _value_size(prop, body, i)
    return reason, receive_maximum


def publish_packet_id(body: bytes | bytearray, start: int) -> int:
    """The packet id of a QoS 1 PUBLISH whose body starts at ``start`` (after its topic)."""
    topic_length = (body[start] << 8) | body[start + 1]
    at = start + 2 + topic_length
    return (body[at] << 8) | body[at + 1]


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _value_size(prop: int, data: bytes, at: int) -> int:
    if prop in _ONE_BYTE:
        return 1
    if prop in _TWO_BYTES:
        return 2
    if prop in _FOUR_BYTES:
        return 4
    if prop in _VARINT:
        return _read_varint(data, at)[1] - at
    if prop in _LENGTH_PREFIXED:
        return 2 + int(struct.unpack_from("!H", data, at)[0])
    if prop in _PAIR:
        first = 2 + int(struct.unpack_from("!H", data, at)[0])
        return first + 2 + int(struct.unpack_from("!H", data, at + first)[0])
    raise ValueError(f"unknown MQTT property 0x{prop:02x}")
