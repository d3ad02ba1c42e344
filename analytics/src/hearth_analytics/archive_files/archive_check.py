"""The archive against the journal, per Kafka partition: what ``hearth archive verify`` and ``status`` say.

Pure logic over two inputs: the archived offsets of each partition (from ``archive_table``) and the
journal's current offset range ``[low, high)`` per partition (Kafka's beginning and end offsets; ``low``
rises as retention deletes old segments). The journal is neither compacted nor transactional, so its
offsets are contiguous: offset ``o`` exists for every ``low <= o < high``.

For each partition:

* **duplicates**: an offset archived more than once (anywhere; the archive must hold each fact once);
* **missing**: an offset in ``[low, archived end)`` that is not archived, where ``archived end`` is one
  past the highest archived offset (capped at ``high``): a gap behind the archive's front;
* **ahead**: an archived offset at or beyond ``high``, or a partition the journal does not have (the
  archive belongs to another journal, or the topic was recreated);
* **lag**: ``high - max(low, archived end)``: journal facts not archived yet. The archive job writes
  every ``archive_trigger_s``, so a little lag is normal; it fails verification only with ``complete``.

Offsets below ``low`` are history the journal no longer holds: kept, counted, not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

MAX_LISTED_GAPS = 5


@dataclass(frozen=True)
class OffsetRange:
    """A journal partition's offsets now: ``low`` (first kept) to ``high`` (next to be written)."""

    low: int
    high: int


@dataclass
class PartitionCheck:
    partition: int
    journal: OffsetRange | None
    archived: int  # rows
    archived_end: int  # one past the highest archived offset (0 if none)
    duplicates: int = 0  # offsets archived more than once (counted once each)
    duplicate_examples: list[int] = field(default_factory=list)
    missing: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)  # [from, to) ranges, the first few
    ahead: int = 0
    lag: int = 0
    before_journal: int = 0  # archived offsets below the journal's low mark (history)

    @property
    def ok(self) -> bool:
        return self.journal is not None and not (self.duplicates or self.missing or self.ahead)


@dataclass
class ArchiveCheck:
    partitions: list[PartitionCheck]
    complete_required: bool = False

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.partitions) and not (self.complete_required and self.lag)

    def problems(self) -> list[str]:
        """One readable line per problem (empty: the archive verifies)."""
        lines = []
        for p in self.partitions:
            if p.journal is None:
                lines.append(f"partition {p.partition}: {p.archived} rows, no such journal partition")
                continue
            if p.duplicates:
                lines.append(f"partition {p.partition}: {p.duplicates} offsets archived more than once, e.g. "
                             + ", ".join(map(str, p.duplicate_examples)))  # fmt: skip
            if p.missing:
                ranges = ", ".join(f"{a}" if b == a + 1 else f"{a}..{b - 1}" for a, b in p.gaps)
                more = " ..." if len(p.gaps) == MAX_LISTED_GAPS else ""
                lines.append(f"partition {p.partition}: {p.missing} offsets missing: {ranges}{more}")
            if p.ahead:
                lines.append(f"partition {p.partition}: {p.ahead} archived offsets at or beyond the "
                             f"journal's end {p.journal.high}")  # fmt: skip
        if self.complete_required and self.lag:
            lines.append(f"{self.lag} journal facts not archived yet (complete archive required)")
        return lines


def _gaps(unique_sorted: npt.NDArray[np.int64], low: int, end: int) -> tuple[int, list[tuple[int, int]]]:
    """Offsets of ``[low, end)`` absent from ``unique_sorted`` (which lies within it): count, first ranges."""
    missing = (end - low) - len(unique_sorted)
    if missing <= 0:
        return 0, []
    bounds = np.concatenate(([low - 1], unique_sorted, [end]))
    starts = np.flatnonzero(np.diff(bounds) > 1)[:MAX_LISTED_GAPS]
    return missing, [(int(bounds[i] + 1), int(bounds[i + 1])) for i in starts]


def check_partition(
    partition: int, offsets: npt.NDArray[np.int64], journal: OffsetRange | None
) -> PartitionCheck:
    offsets = np.sort(np.asarray(offsets, dtype=np.int64))
    archived_end = int(offsets[-1]) + 1 if len(offsets) else 0
    result = PartitionCheck(partition, journal, archived=len(offsets), archived_end=archived_end)
    unique, counts = np.unique(offsets, return_counts=True)
    repeated = unique[counts > 1]
    result.duplicates = len(repeated)
    result.duplicate_examples = [int(o) for o in repeated[:MAX_LISTED_GAPS]]
    if journal is None:
        return result
    result.before_journal = int(np.count_nonzero(unique < journal.low))
    result.ahead = int(np.count_nonzero(unique >= journal.high))
    end = min(max(archived_end, journal.low), journal.high)
    in_range = unique[(unique >= journal.low) & (unique < end)]
    result.missing, result.gaps = _gaps(in_range, journal.low, end)
    result.lag = journal.high - max(journal.low, min(archived_end, journal.high))
    return result


def check_archive(
    partitions: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
    journal: dict[int, OffsetRange],
    *,
    complete: bool = False,
) -> ArchiveCheck:
    """The archive's rows (``partitions[i]``, ``offsets[i]``) against the journal's ranges."""
    partitions = np.asarray(partitions, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    checks = []
    for p in sorted(set(journal) | {int(x) for x in np.unique(partitions)}):
        checks.append(check_partition(p, offsets[partitions == p], journal.get(p)))
    return ArchiveCheck(checks, complete_required=complete)
