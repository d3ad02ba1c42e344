"""How a service process is told to stop: SIGINT or SIGTERM (Ctrl-C, ``kill``, a supervisor, Kubernetes)
sets one ``asyncio.Event``, which the service's run loop waits on and then stops cleanly (a feed saves
its snapshot, a producer flushes). Every long-running part's ``__main__`` takes its stop from here.

A loop that cannot take signal handlers (not the main thread's, or Windows' proactor loop) gets an event
that nothing sets: Ctrl-C's ``KeyboardInterrupt`` still ends the process, without the clean stop."""

from __future__ import annotations

import asyncio
import contextlib
import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM; call from within the running loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    return stop
