"""Every workspace member is type-checked and in the import contracts: a guard that keeps
pyproject.toml's [tool.mypy] and [tool.importlinter] in step with [tool.uv.workspace].

A new member (a service, a tool) fails here until mypy checks its source strictly, the import linter
knows its package, and, if it is a service or the analytics, a layers contract gives its modules their
places (the contracts are exhaustive, so a new module inside must be placed too).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Members not yet checked (none: read-models joined when it was split by job, issue 11 point 1).
NOT_YET: set[str] = set()
# Members with one module or no inner structure worth layering (hearth_shared's folders: issue 23 point 2).
NO_LAYERS = {"shared", "sdk"}


def members() -> dict[str, str]:
    """Each workspace member's directory (relative to the root) and its top-level package."""
    found: dict[str, str] = {}
    for pattern in PYPROJECT["tool"]["uv"]["workspace"]["members"]:
        for directory in sorted(ROOT.glob(pattern)):
            [package] = [p.name for p in (directory / "src").iterdir() if (p / "__init__.py").exists()]
            found[directory.relative_to(ROOT).as_posix()] = package
    return found


def test_every_member_is_checked_by_mypy_strict() -> None:
    mypy = PYPROJECT["tool"]["mypy"]
    assert mypy["strict"] is True
    expected = {f"{member}/src" for member in members() if member not in NOT_YET}
    assert expected <= set(mypy["files"]), expected - set(mypy["files"])
    assert expected <= set(mypy["mypy_path"]), expected - set(mypy["mypy_path"])
    assert "tests" in mypy["files"]  # the whole tests tree: helpers, unit, integration, e2e and chaos


def test_every_member_is_in_the_import_contracts() -> None:
    linter = PYPROJECT["tool"]["importlinter"]
    assert set(members().values()) <= set(linter["root_packages"])
    layered = {
        container
        for contract in linter["contracts"]
        if contract["type"] == "layers"
        for container in contract["containers"]
        if contract.get("exhaustive")
    }
    expected = {package for member, package in members().items() if member not in NOT_YET | NO_LAYERS}
    assert expected <= layered, f"no exhaustive layers contract for {expected - layered}"
