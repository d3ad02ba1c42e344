"""``LoopLag`` sees an event loop held by work between awaits, keeps how long, and logs it when asked."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from hearth_shared.adapters import loop_lag
from hearth_shared.adapters.loop_lag import LoopLag

pytestmark = pytest.mark.unit


def work(seconds: float) -> None:
    """What holds a loop: work between two awaits."""
    time.sleep(seconds)


async def test_a_held_loop_is_kept_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    lag = LoopLag(0.2, log_as="test-part")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=loop_lag.__name__):
        watching = asyncio.create_task(lag.watch())
        await asyncio.sleep(0)  # the watcher is asleep now, due in TICK_S
        work(0.4)  # the loop is held
        await asyncio.sleep(loop_lag.TICK_S)  # the watcher wakes, late
        watching.cancel()
    assert lag.worst_since(started) >= 0.2
    assert lag.worst_since(time.monotonic() + 1) == 0.0  # nothing after that
    assert any(r.getMessage().startswith("test-part: the event loop was held") for r in caplog.records)
