"""The suite's test modules have distinct file names across its folders.

``tests/unit`` and ``tests/integration`` are not packages, so pytest imports their modules by base name:
two ``test_x.py`` in two folders stop the whole run at collection ("import file mismatch"). It happened
twice in one session (a unit test of a fold and the restart test of the same part); this fails first,
naming the pair, so the name is chosen by its job (``test_x_restart.py``) when the file is added.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_file_name() -> None:
    folders: dict[str, list[str]] = defaultdict(list)
    for module in TESTS.rglob("test_*.py"):
        folders[module.name].append(str(module.parent.relative_to(TESTS)))
    shared = {name: sorted(where) for name, where in folders.items() if len(where) > 1}
    assert not shared, f"test modules sharing a file name (rename one by its job): {shared}"
    assert "test_test_names.py" in folders  # the walk found the suite (this very file among it)
