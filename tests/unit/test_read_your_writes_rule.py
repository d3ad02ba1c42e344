"""Read-your-writes with ``command_id`` (``hearth_read_models.query.reads``): the views have passed the
journal's end as it was when the read arrived once the projector's next offset for the device's
partition reached it; a partition it has consumed nothing of has passed only an empty journal's end."""

from __future__ import annotations

import pytest

from hearth_read_models.query.journal_ends import JournalMark
from hearth_read_models.query.reads import passed

pytestmark = pytest.mark.unit


def mark(end_offset: int) -> JournalMark:
    return JournalMark("projector", "hearth.journal", 3, end_offset)


@pytest.mark.parametrize(
    ("consumed", "end_offset", "expected"),
    [
        (None, 0, True),  # nothing written, nothing consumed
        (None, 1, False),  # a fact the projector has not committed any of
        (41, 42, False),  # one record short: the fact the caller was told of may be that one
        (42, 42, True),
        (50, 42, True),  # and facts that came after the read arrived
    ],
)
def test_the_views_pass_the_mark_once_their_next_offset_reaches_it(
    consumed: int | None, end_offset: int, expected: bool
) -> None:
    assert passed(consumed, mark(end_offset)) is expected
