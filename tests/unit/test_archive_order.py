"""Archived rows back in offset order per partition (``archive_order``): runs out of order are held until
the hole before them fills, a seek's start and a stop's end cut runs, and a duplicate or a gap is an
error naming the partition and offsets."""

from __future__ import annotations

import pytest

from hearth_read_models.rebuild.archive_order import ArchiveOutOfOrder, OffsetOrder, Run, split_runs

pytestmark = pytest.mark.unit


def values(offsets: range | list[int]) -> list[bytes]:
    return [f"v{o}".encode() for o in offsets]


def handed(runs: list[Run]) -> list[tuple[int, int, bytes]]:
    return [(r.partition, r.first + i, v) for r in runs for i, v in enumerate(r.values)]


def test_split_runs_cuts_at_holes_and_refuses_a_repeat() -> None:
    runs = split_runs(3, [0, 1, 2, 5, 6, 9], values([0, 1, 2, 5, 6, 9]))
    assert [(r.first, r.end) for r in runs] == [(0, 3), (5, 7), (9, 10)]
    with pytest.raises(ArchiveOutOfOrder, match="partition 3: offset 1 is archived more than once"):
        split_runs(3, [0, 1, 1], values([0, 1, 1]))


def test_rows_ahead_of_a_hole_wait_for_it_and_come_out_in_order() -> None:
    order = OffsetOrder({0: 0, 1: 0}, {0: 10, 1: 4})
    assert handed(order.add(0, [0, 1, 5, 6], values([0, 1, 5, 6]))) == [(0, 0, b"v0"), (0, 1, b"v1")]
    assert order.add(0, [8, 9], values([8, 9])) == []  # still waiting for 2..4 (and 7)
    assert handed(order.add(1, [0, 1, 2, 3], values(range(4))))[-1] == (1, 3, b"v3")
    ready = handed(order.add(0, [2, 3, 4, 7], values([2, 3, 4, 7])))
    assert [o for _, o, _ in ready] == list(range(2, 10))
    assert order.done()
    order.check_complete()


def test_a_seek_start_and_the_end_cut_runs() -> None:
    order = OffsetOrder({0: 3}, {0: 6})
    ready = handed(order.add(0, list(range(0, 8)), values(range(8))))
    assert [o for _, o, _ in ready] == [3, 4, 5]
    assert order.done()


def test_a_repeat_across_files_is_an_error() -> None:
    order = OffsetOrder({0: 0}, {0: 10})
    order.add(0, [0, 1, 2], values(range(3)))
    with pytest.raises(ArchiveOutOfOrder, match="partition 0: offset 2 is archived more than once"):
        order.add(0, [2, 3], values([2, 3]))
    waiting = OffsetOrder({0: 0}, {0: 10})
    waiting.add(0, [5, 6], values([5, 6]))
    with pytest.raises(ArchiveOutOfOrder, match="offset 5 is archived more than once"):
        waiting.add(0, [5], values([5]))


def test_a_gap_left_when_every_file_was_read_is_named() -> None:
    order = OffsetOrder({0: 0, 4: 0}, {0: 10, 4: 2})
    order.add(0, [0, 1, 2, 6, 7, 8, 9], values([0, 1, 2, 6, 7, 8, 9]))
    order.add(4, [0, 1], values([0, 1]))
    assert not order.done()
    with pytest.raises(ArchiveOutOfOrder, match=r"partition 0: offsets 3\.\.5 are not in the archive"):
        order.check_complete()
