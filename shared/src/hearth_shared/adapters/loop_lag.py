"""How late an event loop wakes a task that only sleeps: while the loop is held (a long computation
between awaits, a process starved of CPU), every request it serves waits as long. Each wake-up
``over_s`` or more late is kept (the latest ``KEPT``) and, with ``log_as``, logged with its length: a
slow answer can then be told from a slow dependency (``KafkaWriter`` logs its slow writes likewise).
Used by the command API and by the scale-out drill's client (``hearth bench drill``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

log = logging.getLogger(__name__)

TICK_S = 0.1  # how often the watcher wakes: a lag shorter than this is not seen
KEPT = 1024


class LoopLag:
    def __init__(self, over_s: float, *, log_as: str | None = None) -> None:
        self.over_s = over_s
        self.log_as = log_as
        self.late: deque[tuple[float, float]] = deque(maxlen=KEPT)  # (monotonic time, seconds late)

    async def watch(self) -> None:
        """Run until cancelled (a task of the service's or the drill's own)."""
        while True:
            asked = time.monotonic()
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            late_s = now - asked - TICK_S
            if late_s >= self.over_s:
                self.late.append((now, late_s))
                if self.log_as:
                    log.warning("%s: the event loop was held %.1f s", self.log_as, late_s)

    def worst_since(self, since: float) -> float:
        """The longest lag seen at or after ``since`` (monotonic), 0.0 if none reached ``over_s``."""
        return max((late_s for at, late_s in self.late if at >= since), default=0.0)
