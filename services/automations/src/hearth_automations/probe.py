"""``python -m hearth_automations.probe``: healthy when the process wrote its heartbeat file (every tick,
once it has read both journals to their ends) within the last ``max_age_s`` seconds. compose.yaml runs it
as the service's health check."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hearth_automations.settings import AutomationsSettings


def heartbeat_problem(max_age_s: float = 15.0) -> str | None:
    settings = AutomationsSettings()
    if not settings.heartbeat_file:
        return "no heartbeat file is configured (HEARTH_AUTOMATIONS_HEARTBEAT_FILE)"
    path = Path(settings.heartbeat_file)
    if not path.exists():
        return f"{path} does not exist yet (still reading the journals?)"
    age = time.time() - path.stat().st_mtime
    return None if age <= max_age_s else f"the last heartbeat is {age:.0f} s old"


if __name__ == "__main__":
    problem = heartbeat_problem()
    if problem:
        print(problem, file=sys.stderr)
    sys.exit(1 if problem else 0)
