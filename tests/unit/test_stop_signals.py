"""SIGTERM or SIGINT sets a service's stop event (hearth_shared.adapters.stop_signals), so its run loop
stops cleanly instead of the process dying where it stands."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from hearth_shared.adapters.stop_signals import STOP_SIGNALS, stop_on_signals

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("signum", STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
async def test_a_stop_signal_sets_the_event(signum: int) -> None:
    stop = stop_on_signals()
    try:
        assert not stop.is_set()
        os.kill(os.getpid(), signum)
        await asyncio.wait_for(stop.wait(), timeout=5)
    finally:
        for sig in STOP_SIGNALS:
            asyncio.get_running_loop().remove_signal_handler(sig)


def test_a_loop_outside_the_main_thread_gets_an_event_nothing_sets() -> None:
    made: list[asyncio.Event] = []
    thread = threading.Thread(target=lambda: made.append(asyncio.run(_make())))
    thread.start()
    thread.join()
    assert len(made) == 1 and not made[0].is_set()


async def _make() -> asyncio.Event:
    return stop_on_signals()
