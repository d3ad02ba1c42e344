"""The gateway's edge: one MQTT message from a device in, one inbox request out (or the reason why not).

Pure translation, no I/O. The device id comes from the topic (the broker lets a device publish only to
its own topics, so the topic is who it is); the payload is decoded and checked by
``hearth_shared.schema.mqtt``.

Request ids are derived from what the device sent, so a message the broker delivers twice (QoS 1 is at
least once, and a gateway killed before its PUBACK gets it again) becomes the same request twice, which
the device actor decides once:

* a state report: ``(device_id, seq)``; the actor also drops any report whose seq is not above the last;
* an ack: ``(device_id, command_id, result)``; a second ack of a command changes nothing either;
* availability carries nothing to derive from: the id is fresh, and a repeat is harmless because
  ``online`` for an online device (or ``offline`` for an offline one) decides nothing.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from hearth_shared.schema.events import (
    AcknowledgeCommand,
    Inbound,
    MalformedRecord,
    ReportAvailability,
    ReportState,
    new_id,
)
from hearth_shared.schema.mqtt import (
    ACKS,
    AVAILABILITY,
    STATE,
    decode_ack,
    decode_availability,
    decode_state,
    parse_topic,
)

# A fixed namespace for the gateway's derived request ids (uuid5 of it and what the device sent).
REQUEST_NAMESPACE = uuid.UUID("7a3c1f52-6c0e-5b1e-9a55-2f8e4d1c9b07")


def request_id(*parts: str) -> uuid.UUID:
    return uuid.uuid5(REQUEST_NAMESPACE, "/".join(parts))


def to_request(topic: str, payload: bytes, now: datetime) -> Inbound:
    """The inbox request a device message means; raises ``MalformedRecord`` with the reason if none."""
    where = parse_topic(topic)
    device_id = where.device_id
    if where.channel == STATE:
        report = decode_state(payload)
        return ReportState(
            request_id=request_id(device_id, STATE, str(report.seq)),
            device_id=device_id,
            sent_at=now,
            device_seq=report.seq,
            device_time=report.at,
            state=report.state,
        )
    if where.channel == ACKS:
        ack = decode_ack(payload)
        ok = ack.result == "ok"
        return AcknowledgeCommand(
            request_id=request_id(device_id, ACKS, str(ack.command_id), ack.result),
            device_id=device_id,
            sent_at=now,
            command_id=ack.command_id,
            ok=ok,
            reason="" if ok else ack.reason or "device_refused",
            message=ack.reason,
        )
    if where.channel == AVAILABILITY:
        return ReportAvailability(
            request_id=new_id(), device_id=device_id, sent_at=now, online=decode_availability(payload)
        )
    raise MalformedRecord("wrong_direction", f"{where.channel!r} is a topic Hearth publishes, not devices")
