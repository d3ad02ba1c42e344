"""The query API's parameters as the edge accepts them, and its paging cursors.

Every id (device, home, in a path or a query) follows hearth_shared.schema.ids' one pattern, and so do the
names a query filters by (device types, fact types, rollup windows: ``thermostat``, ``command.requested``,
``15m``): a value PostgreSQL or Redis could choke on (NUL, control characters) is a 422 before any query is
built. Numbers that reach SQL are bounded to what a bigint holds. A cursor is opaque base64 of ``|``-joined
parts; one that does not decode to parts without control characters is a 422 that says so, never a 500.
An empty ``home_id`` or paging ``after`` means none was given, as it always did (the live page sends
``after=`` for the first page); an empty filter is a 422.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BeforeValidator, StringConstraints

from hearth_shared.schema.ids import IDENTIFIER_PATTERN, has_control_characters
from hearth_shared.web.http_errors import unprocessable

BIGINT_MAX = 2**63 - 1


def _empty_as_absent(value: object) -> object:
    return None if value == "" else value


EmptyAsAbsent = BeforeValidator(_empty_as_absent)
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]

DeviceId = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description="The device's id")]
HomeIdFilter = Annotated[Identifier | None, EmptyAsAbsent, Query(description="Only this home")]
DeviceIdFilter = Annotated[str | None, Query(pattern=IDENTIFIER_PATTERN, description="Only this device's")]
DeviceTypeFilter = Annotated[
    str | None, Query(alias="type", pattern=IDENTIFIER_PATTERN, description="Only devices of this type")
]
FactTypeFilter = Annotated[
    str | None,
    Query(
        alias="type",
        pattern=IDENTIFIER_PATTERN,
        description="Only facts of this type, e.g. device.registered",
    ),
]
WindowFilter = Annotated[
    str | None, Query(pattern=IDENTIFIER_PATTERN, description="Only windows of this length, e.g. 1m or 15m")
]
AfterDevice = Annotated[
    Identifier | None,
    EmptyAsAbsent,
    Query(description="Paging: the last device_id of the previous page (empty or absent: the first)"),
]
AfterVersion = Annotated[int, Query(ge=0, le=BIGINT_MAX, description="Paging: facts after this version")]
MinVersion = Annotated[
    int | None,
    Query(
        ge=1,
        le=BIGINT_MAX,
        description="Read-your-writes: answer once the view has this device version (e.g. a command "
        "answer's `twin_version`)",
    ),
]
AfterCommand = Annotated[
    uuid.UUID | None,
    Query(
        description="Read-your-writes: answer once the view has this command of the device and the device's "
        "journal as far as it went when the read arrived (so the command in at least the status it was "
        "last answered with)"
    ),
]
WaitS = Annotated[
    float, Query(ge=0, le=30, description="Seconds to wait for `min_version` / `command_id` (or the command)")
]
Limit = Annotated[int, Query(ge=1, le=1000, description="Items per page")]
Cursor = Annotated[str | None, Query(max_length=512, description="Paging: `next_after` of the previous page")]


def encode_cursor(*parts: Any) -> str:
    return base64.urlsafe_b64encode("|".join(map(str, parts)).encode()).decode().rstrip("=")


def _not_a_cursor(why: str) -> Exception:
    return unprocessable(("query", "after"), "invalid_cursor", f"after: not a cursor of this API ({why})")


def decode_cursor(cursor: str, parts: int) -> list[str]:
    """The ``parts`` texts of a cursor made by ``encode_cursor``; a 422 for anything else."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except ValueError as exc:
        raise _not_a_cursor("not base64 of UTF-8 text") from exc
    values = text.split("|", parts - 1)
    if len(values) != parts:
        raise _not_a_cursor(f"{len(values)} parts, not {parts}")
    if any(map(has_control_characters, values)):
        raise _not_a_cursor("control characters")
    return values


def cursor_time(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise _not_a_cursor("no time") from exc


def cursor_position(text: str) -> int:
    """A journal offset in a cursor (bounded to a bigint, as SQL takes it)."""
    try:
        position = int(text)
    except ValueError as exc:
        raise _not_a_cursor("no position") from exc
    if not 0 <= position <= BIGINT_MAX:
        raise _not_a_cursor("no position")
    return position


def cursor_uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError as exc:
        raise _not_a_cursor("no event id") from exc


def page(items: list[Any], limit: int, cursor: Callable[[Any], str]) -> dict[str, Any]:
    return {"items": items, "next_after": cursor(items[-1]) if len(items) == limit else None}
