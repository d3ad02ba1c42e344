"""Putting archived journal rows back in offset order, per journal partition, each offset once.

The archive's files do not hold a partition's offsets in one ascending sequence: a micro-batch writes one
file per day it touches (a record's day is its Kafka timestamp's, and timestamps are not strictly
monotonic in offsets), Spark's partitioned writer sorts a file's rows by day only, and compaction merges
a day's files into one. What is certain is that the journal's offsets are contiguous (it is neither
compacted nor transactional) and that a verified archive holds each one once.

So ``OffsetOrder`` takes rows in whatever order the files give them and hands out, per partition, the
contiguous run that starts at the next expected offset; a run that starts further on waits (in memory:
only the rows that arrive ahead of a hole, a few stragglers across a day's boundary). An offset handed
out before is a duplicate, and an offset still missing when every file was read is a gap: both are
errors (``ArchiveOutOfOrder``) naming the partition and offsets, never a silent skip: a rebuild from a
broken archive would quietly differ from the journal.

Pure logic, no I/O (``archive_source.py`` reads the files).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


class ArchiveOutOfOrder(RuntimeError):
    """The archive holds an offset twice, or lacks one (``hearth archive verify`` names them all)."""


@dataclass
class Run:
    """Contiguous offsets of one partition, ``first`` to ``first + len(values) - 1``."""

    partition: int
    first: int
    values: list[bytes]

    @property
    def end(self) -> int:
        return self.first + len(self.values)


def split_runs(partition: int, offsets: Sequence[int], values: Sequence[bytes]) -> list[Run]:
    """Sorted offsets (and their values) as contiguous runs; an offset twice is an error."""
    runs: list[Run] = []
    for i, offset in enumerate(offsets):
        if runs and offset == runs[-1].end:
            runs[-1].values.append(values[i])
            continue
        if runs and offset < runs[-1].end:
            raise ArchiveOutOfOrder(f"partition {partition}: offset {offset} is archived more than once")
        runs.append(Run(partition, offset, [values[i]]))
    return runs


@dataclass
class OffsetOrder:
    """Per partition, from ``next[p]`` (the first offset to hand out) up to ``ends[p]`` (exclusive)."""

    next: dict[int, int]
    ends: dict[int, int]
    waiting: dict[int, dict[int, Run]] = field(default_factory=dict)  # partition -> first offset -> run
    begins: dict[int, int] = field(default_factory=dict)  # where each partition starts (``next`` at first)

    def __post_init__(self) -> None:
        self.begins = dict(self.next)

    def add(self, partition: int, offsets: Sequence[int], values: Sequence[bytes]) -> list[Run]:
        """Rows of one partition, sorted by offset: the runs that are ready now, in order."""
        ready: list[Run] = []
        start, end = self.begins.get(partition, 0), self.ends.get(partition, 0)
        for run in split_runs(partition, offsets, values):
            if run.end <= start or run.first >= end:
                continue  # before where this replay starts (``seek``), or past where it stops
            if run.first < start:  # begins before the start: the rest of it
                run = Run(partition, start, run.values[start - run.first :])
            if run.end > end:
                run = Run(partition, run.first, run.values[: end - run.first])
            self._wait(run)
        expected = self.next.get(partition, 0)
        waiting = self.waiting.get(partition, {})
        while expected in waiting:
            run = waiting.pop(expected)
            ready.append(run)
            expected = run.end
        self.next[partition] = expected
        return ready

    def _wait(self, run: Run) -> None:
        waiting = self.waiting.setdefault(run.partition, {})
        if run.first < self.next.get(run.partition, 0) or run.first in waiting:
            raise ArchiveOutOfOrder(
                f"partition {run.partition}: offset {run.first} is archived more than once"
            )
        waiting[run.first] = run

    def done(self) -> bool:
        return all(self.next.get(p, 0) >= end for p, end in self.ends.items())

    def check_complete(self) -> None:
        """Every file was read: every partition must have reached its end."""
        problems = []
        for p, end in sorted(self.ends.items()):
            expected = self.next.get(p, 0)
            waiting = sorted(self.waiting.get(p, {}))
            if expected < end:
                upto = (waiting[0] if waiting else end) - 1
                problems.append(f"partition {p}: offsets {expected}..{upto} are not in the archive")
            elif waiting:  # runs overlapping ones handed out already
                problems.append(f"partition {p}: offset {waiting[0]} is archived more than once")
        if problems:
            raise ArchiveOutOfOrder("; ".join(problems) + " (run `hearth archive verify`)")
