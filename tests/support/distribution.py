"""Which tests share a worker, and in what order they start, when the suite runs in parallel (a pytest
plugin, loaded by tests/conftest.py; ``make test`` runs ``pytest -n 3``, pytest-xdist).

Each worker is a pytest session of its own, with its own servers on free ports in its own temporary
directory (tests/conftest.py's session fixtures), and each test has its own topics and schema, so no test
needs a group to be isolated. Tests are grouped where one process must hold what they share, and pytest
runs with ``--dist loadgroup`` (pyproject's addopts) so a group stays on one worker:

- every test that uses the ``spark`` fixture: one SparkSession (a JVM of 2 GB that takes 6-30 s of two
  busy cores to start) for the whole run;
- every test that uses the ``browser`` fixture: one Chromium for the whole run;
- every chaos test (``@pytest.mark.chaos``): one worker runs the chaos modules one after another. Each
  starts a whole stack of its own (three JVMs for the broker-kill cluster) and kills parts of it on a
  clock; two of them side by side on two cores starved each other's restarts, and the other worker has
  the rest of the suite to run meanwhile;
- the tests of a module with a module-scoped fixture (a supervised stack, an S3 server): it starts once.

The group comes from the fixtures a test uses (directly or through another fixture), so a new Spark or
browser test needs no mark.

The order is the longest-processing-time rule: the work that takes longest starts first, so no slow
chaos module is left to begin while the other workers run dry. A group or module weighs the seconds
its tests took when they last ran (``.hearth/test-seconds.json``, ``tests/support/durations.py``); a
test not in that file (a new one, or a fresh checkout) weighs a guess from its marker. A module's tests stay
together and in their order, with or without workers (its module-scoped fixtures start once), and
``--no-loadscope-reorder`` keeps xdist from reordering the groups by their number of tests.

xdist tells its scheduler a test's group by renaming the test (``...::test@group``); pytest 9.2 made that
rename a silent no-op (pytest-dev/pytest-xdist#1386, hence pytest <9.2 in pyproject). So a grouped test
that xdist did not rename fails at its setup, saying so: Spark and Chromium started on every worker would
otherwise load the machine and pass, unnoticed.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.durations import known_seconds, plain_nodeid

# Fixtures whose tests run in one worker: the process that holds the one SparkSession or browser.
SHARED_IN_ONE_WORKER = ("spark", "browser")
# Seconds a test with no seconds on record is taken to need, by its marker (about the median of each
# kind in a full run; a chaos module's stack alone takes a minute to start).
GUESSED_S = {"chaos": 120.0, "e2e": 10.0, "integration": 3.0, "unit": 0.05}
SHARED_SCOPES = {"module", "class", "package"}


def group_of(item: pytest.Item) -> str | None:
    """The xdist group the test must run in, or None (any worker)."""
    fixtures = getattr(item, "fixturenames", ())
    for shared in SHARED_IN_ONE_WORKER:
        if shared in fixtures:
            return shared
    if item.get_closest_marker("chaos") is not None:
        return "chaos"  # (after Spark: the retention chaos test archives with the one SparkSession)
    if isinstance(item, pytest.Function):
        definitions = item._fixtureinfo.name2fixturedefs.values()
        if any(defs and defs[-1].scope in SHARED_SCOPES for defs in definitions):
            return module_of(item)
    return None


def module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def expected_s(item: pytest.Item, known: dict[str, float]) -> float:
    if (seconds := known.get(plain_nodeid(item.nodeid))) is not None:
        return seconds
    kind = next((k for k in GUESSED_S if item.get_closest_marker(k) is not None), None)
    return GUESSED_S[kind] if kind else 1.0


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    known = known_seconds(Path(config.rootpath))
    groups = {id(item): group_of(item) for item in items}
    for item in items:
        if (group := groups[id(item)]) is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # A unit of work: a group, or else a module; its weight is its tests' expected seconds.
    unit = {id(item): groups[id(item)] or module_of(item) for item in items}
    weight: defaultdict[str, float] = defaultdict(float)
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        weight[unit[id(item)]] += expected_s(item, known)
        first.setdefault(unit[id(item)], index)
    order = {id(item): index for index, item in enumerate(items)}
    items.sort(key=lambda item: (-weight[unit[id(item)]], first[unit[id(item)]], order[id(item)]))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """On an xdist worker under ``--dist loadgroup``: a grouped test fails unless xdist grouped it."""
    on_worker = hasattr(item.config, "workerinput")  # xdist sets it on its workers only (not with -n 0)
    if (
        on_worker
        and item.config.getoption("loadgroup", default=False)
        and group_of(item)
        and "@" not in item.nodeid
    ):
        pytest.fail(f"pytest-xdist did not group {item.nodeid} (see pytest-dev/pytest-xdist#1386)")
