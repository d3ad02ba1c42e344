"""Identifiers and free text at the platform's edges: one rule for each, used everywhere.

Device ids and home ids travel as Kafka keys, PostgreSQL text, Redis key and channel names, MQTT usernames
and topic levels, and URL path segments. One pattern fits all of them: ASCII letters and digits first,
then letters, digits and ``. _ : -``, at most 64 characters. No NUL, no control characters, no ``/``,
``+`` or ``#`` (MQTT topic syntax), no ``|`` (it framed old token scopes).

Free text (a device's name, a reason) may be any Unicode except NUL and other control characters:
PostgreSQL text cannot hold NUL, and control characters break logs, cursors and terminals.

Every edge (HTTP bodies, paths and queries, MQTT payloads, tokens) checks with these; consumers behind the
edge treat a fact that breaks them as a dead letter, never as a crash (see hearth_shared.adapters.kafka).
"""

from __future__ import annotations

import math
import re
from typing import Any

IDENTIFIER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
# C0 and C1 control characters (NUL included) and DEL; tab, newline and carriage return are not allowed
# either: names and reasons are one line.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def is_identifier(value: object) -> bool:
    """A device id or home id as the platform accepts it everywhere."""
    return isinstance(value, str) and _IDENTIFIER.fullmatch(value) is not None


def has_control_characters(text: str) -> bool:
    return _CONTROL.search(text) is not None


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def find_unstorable(value: Any, path: str = "") -> str | None:
    """Where in a JSON value a consumer would choke: a string with NUL or control characters (also in
    keys), a number that is not finite, or an integer beyond 64 bits (msgpack and PostgreSQL's bigint
    stop there). Returns the path to it (``"params.mode"``), or None.

    Every state report goes through this at the gateway, and almost all are fine: a first walk only
    says whether all is well (``_storable``, no path strings built); the paths are made only when not."""
    if _storable(value):
        return None
    return _find(value, path)


def _storable(value: Any) -> bool:
    """``find_unstorable(value) is None``, faster for what JSON decodes to (exact types; anything else
    is left to ``_find``)."""
    kind = type(value)
    if kind is str:
        return _CONTROL.search(value) is None
    if kind is float:
        return math.isfinite(value)
    if kind is int:
        return bool(INT64_MIN <= value <= INT64_MAX)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or _CONTROL.search(key) is not None or not _storable(item):
                return False
        return True
    if kind is list:
        return all(_storable(item) for item in value)
    if value is None or kind is bool:
        return True
    return _find(value, "") is None


def _find(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        return path or "." if has_control_characters(value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or ".")
    if isinstance(value, int) and not isinstance(value, bool):
        return None if INT64_MIN <= value <= INT64_MAX else (path or ".")
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str) or has_control_characters(key):
                return where
            found = _find(item, where)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _find(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None
