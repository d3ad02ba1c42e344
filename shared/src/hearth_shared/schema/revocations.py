"""``token.revoked``: the record of the compacted revocations topic, one per revoked token.

A revocation has its own small envelope (it belongs to no device, so it is not a device ``Event``). Its
fact id is derived from the token id, so revoking twice (from the CLI and the API, or a retry) is the same
fact. The topic's writer and follower are ``hearth_shared.adapters.revocations``; the record is here, in
the schema, so that what names it (the command API's ``TopicWriter`` port) needs no broker client.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import msgspec

from hearth_shared.schema.record_envelope import utcnow

REVOCATION_NAMESPACE = uuid.UUID("6b1c3c0e-2f49-4d59-9a55-0c7e1d3b8a42")


class TokenRevoked(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="token.revoked"):
    event_id: uuid.UUID
    token_id: str
    revoked_at: datetime
    reason: str = ""
    by: str = ""  # who revoked it: "cli", or the admin token id that called the API


def token_revoked(token_id: str, *, reason: str = "", by: str = "") -> TokenRevoked:
    event_id = uuid.uuid5(REVOCATION_NAMESPACE, f"token.revoked\n{token_id}")
    return TokenRevoked(event_id=event_id, token_id=token_id, revoked_at=utcnow(), reason=reason, by=by)
