"""``find_unstorable`` (hearth_shared.schema.ids): where a JSON value holds what a consumer would choke on,
with the path to it; what is fine (almost every report) is said without building paths."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from hearth_shared.schema.ids import find_unstorable

pytestmark = pytest.mark.unit


class _Mode(enum.IntEnum):
    HEAT = 1


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"ambient_c": 20.5, "humidity_pct": 40, "on": True, "note": None, "tags": ["a", 1.5]}, None),
        ({"nested": {"deep": [1, {"k": "v"}]}, "t": ("x", 2)}, None),
        ({"mode": _Mode.HEAT, "big": 2**63 - 1, "small": -(2**63)}, None),
        ({"ambient_c": float("inf")}, "ambient_c"),
        ({"a": {"b": [1, 2, float("nan")]}}, "a.b[2]"),
        ({"a": {"b\x00": 1}}, "a.b\x00"),
        ({"a": ["ok", "line\nbreak"]}, "a[1]"),
        ({"count": 2**63}, "count"),
        ({"t": ("x", -(2**63) - 1)}, "t[1]"),
        ({1: "not a text key"}, "1"),
        ("\x7f", "."),
        (float("-inf"), "."),
    ],
)
def test_what_a_consumer_would_choke_on_and_where(value: Any, where: str | None) -> None:
    assert find_unstorable(value) == where


def test_the_path_starts_where_the_caller_says() -> None:
    assert find_unstorable({"x": float("nan")}, "params") == "params.x"
