"""``held_fetches``: the consumer settings that let the broker hold a fetch for a few ms. A wait of 0
must mean Kafka's own behaviour, never a fetch that asks for a megabyte and waits 0 ms (a busy poll)."""

from __future__ import annotations

import pytest

from hearth_shared.adapters.kafka import FOLLOWER_FETCH_MIN_BYTES, held_fetches

pytestmark = pytest.mark.unit


def test_a_held_fetch_waits_that_long_for_more_than_a_trickle() -> None:
    assert held_fetches(10) == {"fetch_max_wait_ms": 10, "fetch_min_bytes": FOLLOWER_FETCH_MIN_BYTES}
    assert FOLLOWER_FETCH_MIN_BYTES >= 64 * 1024  # far more than a few commands' facts


def test_no_wait_is_kafkas_default_not_a_busy_poll() -> None:
    assert held_fetches(0) == {}
