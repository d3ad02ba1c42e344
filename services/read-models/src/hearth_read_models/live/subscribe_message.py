"""What a ``WS /v1/subscribe`` client may send, and the close codes it may get.

The first message is read whole only when it is at most ``subscribe_max_message_bytes`` (the transport
refuses frames over four times that with 1009 before they are buffered); it must be a JSON object
``{"action": "subscribe", "home_id" | "device_ids", "after"?}`` whose every id (home, devices, the keys of
``after``) follows hearth_shared.schema.ids' one pattern. Anything else is refused with an ``error`` message
and close code 4400 that say what is wrong, before any id reaches PostgreSQL or Redis (a NUL in an id used to
reach PostgreSQL and end the socket with 1011). Later messages are not expected; one over the limit is a
4400 too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from hearth_shared.schema.ids import is_identifier

BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, TOO_SLOW = 4400, 4401, 4403, 4408
FEED_LOST, GOING_AWAY = 1011, 1001
TRANSPORT_LIMIT_FACTOR = 4  # the server's own frame limit, as a multiple of subscribe_max_message_bytes


class SubscribeRequest(msgspec.Struct, frozen=True):
    action: Literal["subscribe"]
    home_id: str | None = None
    device_ids: Annotated[list[str], msgspec.Meta(min_length=1, max_length=1000)] | None = None
    after: Annotated[
        dict[str, Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]], msgspec.Meta(max_length=1000)
    ] = {}


class Refused(Exception):
    """A websocket refused with ``code`` and an error message of ``reason`` saying ``message``."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


_request = msgspec.json.Decoder(SubscribeRequest)


def bad_request(message: str) -> Refused:
    return Refused(BAD_REQUEST, "bad_request", message)


def check_size(received: Mapping[str, Any], limit: int) -> None:
    """Refuse a received websocket message over ``limit`` bytes (UTF-8 for text)."""
    text, data = received.get("text"), received.get("bytes")
    size = len(data) if data is not None else len(text.encode()) if text is not None else 0
    if size > limit:
        raise bad_request(f"message too large: {size} bytes, at most {limit} are accepted")


def parse_subscribe(received: Mapping[str, Any], limit: int) -> SubscribeRequest:
    """The subscribe request in a received ASGI websocket message, or ``Refused`` (4400) saying why."""
    check_size(received, limit)
    text = received.get("text")
    if text is None:
        raise bad_request("send the subscribe message as text")
    try:
        request = _request.decode(text)
    except msgspec.DecodeError as exc:
        raise bad_request(f"bad subscribe message: {exc}") from exc
    if request.home_id is not None and request.device_ids is not None:
        raise bad_request("subscribe to a home_id or to device_ids, not both")
    ids = [("home_id", request.home_id)] if request.home_id is not None else []
    ids += [("device_ids", device_id) for device_id in request.device_ids or ()]
    ids += [("after", device_id) for device_id in request.after]
    for where, value in ids:
        if not is_identifier(value):
            raise bad_request(
                f"{where}: {value[:70]!r} is not an id (letters and digits first, then letters, digits and "
                "'._:-', at most 64 characters)"
            )
    return request
