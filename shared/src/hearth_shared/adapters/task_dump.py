"""``kill -USR1 <pid>`` makes a service print what each of its asyncio tasks is waiting on, to stderr
(its log): the way to see where a live process is stuck without stopping it. Installed by the parts
whose stalls were seen but not caught (the device actor, the command API)."""

from __future__ import annotations

import asyncio
import signal
import sys

STACK_FRAMES = 6  # a task's innermost frames: enough to see the await it sits on


def dump_tasks() -> None:
    for task in asyncio.all_tasks():
        task.print_stack(limit=STACK_FRAMES, file=sys.stderr)
    sys.stderr.flush()


def dump_tasks_on_sigusr1() -> bool:
    """Call from within the running loop (a lifespan, a service's start). Only a loop in the main thread
    can take signals: in any other (an app served by a test client's thread) nothing is installed and it
    says so (False)."""
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump_tasks)
    except (RuntimeError, ValueError):  # not the main thread's loop
        return False
    return True
