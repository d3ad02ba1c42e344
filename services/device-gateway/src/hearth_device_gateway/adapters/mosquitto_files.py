"""The broker's side of its access files: write them where Mosquitto reads them, and make it reload them.

``replace_if_changed`` writes a file atomically (a temporary file renamed over it, mode 0600: they hold
password hashes) and only when its text changed, so the broker-access follower reloads the broker only
for a real change. ``signal_broker`` sends the broker SIGHUP (its pid from its pid file): Mosquitto then
re-reads its password and ACL files and drops the clients no longer allowed. The follower must so share
the broker's filesystem and be able to signal it (entrypoints/broker_access_follower.py says why).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def signal_broker(pid_file: Path) -> None:
    """SIGHUP the broker: it re-reads its password and ACL files and drops clients no longer allowed."""
    os.kill(int(pid_file.read_text().strip()), signal.SIGHUP)


def replace_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` atomically (mode 0600) unless it holds it already; True if written."""
    with contextlib.suppress(FileNotFoundError):
        if path.read_text() == text:
            return False
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    partial.replace(path)
    return True
