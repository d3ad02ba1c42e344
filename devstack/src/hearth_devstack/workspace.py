"""Where the checkout is: the workspace root (the directory holding uv.lock), found from this file, so the
tools find ``.hearth/`` (fetched jars) and ``bench/results/`` wherever the package sits in the tree."""

from __future__ import annotations

from pathlib import Path


def _workspace_root() -> Path:
    here = Path(__file__).resolve()
    for directory in here.parents:
        if (directory / "uv.lock").exists():
            return directory
    raise RuntimeError(f"no uv.lock above {here}: the tools run from a checkout of the workspace")


REPO_ROOT = _workspace_root()
