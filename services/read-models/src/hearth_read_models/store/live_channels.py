"""What the projector writes to Redis and the query side reads there, declared once: the twin cache's
key names, the per-home change channels, and the shape of a message on them.

Both sides import this module and nothing else of each other (import-linter's CQRS contract forbids the
query side the projector's modules), so a key or a message field changes here or nowhere.

A message on a home channel is a JSON object: ``type`` (``change``: one fact, with ``event`` as on the
wire; ``snapshot``: a rebuild replaced the twin), ``device_id``, ``version`` and ``twin`` (the view right
after it). The hub reads ``PublishedChange`` of it and passes the text on unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

CHANGE: Literal["change"] = "change"
SNAPSHOT: Literal["snapshot"] = "snapshot"

_json = msgspec.json.Encoder()


def twin_key(device_id: str) -> str:
    """The Redis key of a device's cached twin view (JSON)."""
    return f"twin:{device_id}"


def home_channel(home_id: str) -> str:
    """The Redis channel a home's changes are published on."""
    return f"home:{home_id}"


def change_message(
    kind: Literal["change", "snapshot"], device_id: str, version: int, twin: Any, event: Any = None
) -> bytes:
    """A message on a home channel (``event``: the fact as on the wire, ``msgspec.Raw``; only a change
    carries one)."""
    message = {"type": kind, "device_id": device_id, "version": version, "twin": twin}
    if kind == CHANGE:
        message["event"] = event
    return _json.encode(message)


class PublishedChange(msgspec.Struct):
    """What a reader needs of a message on a home channel (the rest is passed on as it is)."""

    type: str
    device_id: str
    version: int


decode_published = msgspec.json.Decoder(PublishedChange).decode
