"""The garbage collector's policy for a long-running service process, in one place.

CPython's default thresholds (700, 10, 10) run a young collection every 700 net allocations and a full
one, which walks every tracked object, whenever the objects that survived two collections grew by a
quarter. A service with requests in flight (the command API's ``?wait=`` answers), state it keeps (the
device book, the actor's twins, a projector's caches) or both promotes much to the old generation, so
full collections come every few seconds, and each holds every request and record in the process while
it walks. Measured on 2026-11-29 (docs/BENCHMARKS.md, roundtrip): the command API at 400 commands/s ran a
full collection every 2-3 s, each a stall of 45-145 ms, about a fifth of its CPU in the collector; the
automations service at 4,000 readings/s, stalls of up to 250 ms; the device actor folded 15-30 % more
reports a second with this policy (``hearth bench actor``, alternated runs).

- ``collect_less_often()``, at a process's start: young collections every 50,000 net allocations, and
  full ones far apart (the quarter rule still holds them back while the heap does not grow).
- ``freeze_started_state()``, once a process has built or loaded what it keeps (its app, its modules, a
  replayed snapshot): collected once, then out of every later collection's walk (``gc.freeze``).

Only a service's own process calls them (its ``__main__`` or its run loop), never a library or a test's
composition root: the collector's settings are the whole process's.
"""

from __future__ import annotations

import gc

SERVICE_THRESHOLDS = (50_000, 20, 100)


def collect_less_often() -> None:
    gc.set_threshold(*SERVICE_THRESHOLDS)


def freeze_started_state() -> None:
    gc.collect()
    gc.freeze()
