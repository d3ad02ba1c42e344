"""``Change``: a fact to record, before it has an envelope (``decide`` returns them, ``stamp`` wraps them).

Its own module so that rule modules besides decide.py (admin.py) can make them without importing decide.
"""

from __future__ import annotations

import uuid

import msgspec

from hearth_shared.schema.events import Event, Payload


class Change(msgspec.Struct, frozen=True):
    """A fact to record, before it has an envelope."""

    event_type: type[Event]
    payload: Payload
    correlation_id: uuid.UUID | None = None
