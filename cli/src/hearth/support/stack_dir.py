"""The stack directory every ``hearth`` command may be pointed at (``--stack-dir``, ``.hearth/`` by
default): where a stack keeps its token secret (``secret``) and its data (``data/``, the archive table
under ``data/analytics/archive``).

The operator's commands only read it (an admin token signed with its secret, the local archive table);
the local stack (``hearth_devstack``) makes and fills it, and imports these names from here, so the layout
is written once and the operator's CLI needs no dev package to find it. In an image the directory need
not exist: HEARTH_TOKEN_SECRET and HEARTH_ANALYTICS_ARCHIVE_URL win.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_HOME = Path(".hearth")
Home = Annotated[
    Path, typer.Option("--stack-dir", help="Where the local stack keeps data, logs and its secret")
]  # every command that needs the stack's secret or data takes it


def token_secret(home: Path) -> str:
    """The secret that signs API tokens, made once per home directory (HEARTH_TOKEN_SECRET wins)."""
    if os.environ.get("HEARTH_TOKEN_SECRET"):
        return os.environ["HEARTH_TOKEN_SECRET"]
    path = home / "secret"
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


def archive_dir(data: Path) -> Path:
    """The local stack's archive table (``hearth_analytics.jobs.archive``), under its data directory."""
    return data / "analytics" / "archive"


__all__ = ["DEFAULT_HOME", "Home", "archive_dir", "token_secret"]
