"""The figures of ``hearth bench gateway``, from what was measured. Pure: no I/O, no clock.

* ``Arrivals`` counts messages as they arrive, in batches, at wall-clock times; its rate runs from the
  first arrival to the last (as the other benches' floors do: the time to set up is not counted), over
  the messages after the first batch (the first batch's messages arrived at ``first``, not over the
  interval measured).
* ``per_connection_kib``: memory per connection from resident sizes before and after ``connections``
  were opened.
* ``top_frames``: the busiest functions of a py-spy profile (collapsed stacks).
* ``report_payloads``: the state reports the bench's devices publish: per device seq 1, 2, 3 ... and a
  reading that changes with every report (so every report is a state change, and so a fact).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

_LINE = re.compile(r":\d+\)$")


@dataclass
class Arrivals:
    """Messages counted as they arrive; ``rate`` is messages/s from the first arrival to the last."""

    count: int = 0
    first: float = 0.0  # wall-clock time of the first batch
    last: float = 0.0  # of the latest
    first_batch: int = 0

    def add(self, n: int, at: float) -> None:
        if n <= 0:
            return
        if not self.count:
            self.first, self.first_batch = at, n
        self.count += n
        self.last = at

    @property
    def seconds(self) -> float:
        return self.last - self.first

    @property
    def rate(self) -> float:
        """Messages/s after the first batch, over the time from the first arrival to the last (0 if
        everything came at once, or nothing came)."""
        if self.seconds <= 0:
            return 0.0
        return (self.count - self.first_batch) / self.seconds


def per_connection_kib(rss_before: int, rss_after: int, connections: int) -> float:
    """KiB of resident memory per connection (bytes before and after ``connections`` were opened)."""
    if connections <= 0:
        raise ValueError("no connections to divide by")
    return (rss_after - rss_before) / connections / 1024


class _Report(msgspec.Struct):
    seq: int
    at: str
    state: dict[str, float]


_encode = msgspec.json.Encoder().encode


def report_payloads(devices: int, reports: int, *, at: str) -> Iterator[tuple[int, bytes]]:
    """``reports`` state reports as (device index, payload), round robin over ``devices``: device ``d``
    reports seq 1, 2, 3 ... each with another ``ambient_c`` than its last (a state change)."""
    for n in range(reports):
        device, seq = n % devices, n // devices + 1
        reading = 18.0 + (seq % 50) * 0.1  # never the same twice in a row
        payload = _Report(seq=seq, at=at, state={"ambient_c": round(reading, 1), "humidity_pct": 40.0})
        yield device, _encode(payload)


def top_frames(collapsed: str, n: int = 15) -> dict[str, list[tuple[str, float]]]:
    """The busiest functions of a profile in collapsed-stack form (``frame;frame;... count`` lines, as
    py-spy's ``--format raw`` writes): by self time (the innermost frame) and by total time (on the stack
    at all), each as (function, share of all samples), ``n`` of each, busiest first. A frame's line
    number is dropped (``f (file.py:12)`` -> ``f (file.py)``): a function's lines count together."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_LINE.sub(")", frame) for frame in stack.split(";")]
        samples += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            total[frame] += int(count)
    if not samples:
        return {"self": [], "total": []}
    return {
        "self": [(f, round(c / samples, 3)) for f, c in own.most_common(n)],
        "total": [(f, round(c / samples, 3)) for f, c in total.most_common(n)],
    }


def ratio(rate: float, floor: float) -> float:
    return round(rate / floor, 3) if floor > 0 else 0.0
