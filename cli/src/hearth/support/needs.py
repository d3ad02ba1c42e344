"""What an operator's command needs beyond the services' image, and what it says when that is missing.

The services' image carries hearth-cli without its extras, so every command a person types there starts
without Spark, pandas or the device SDK (tests/unit/test_operator_cli.py runs each one's ``--help`` with
only the image's packages importable). The few that need more import it inside the command, under
``needs``:

* ``spark`` (hearth-analytics: PySpark, pandas, pyarrow): ``hearth archive ...`` reads the archive table
  with ``hearth_analytics``; ``hearth analytics`` runs its jobs; ``hearth automation backtest`` over a long
  stretch (or ``--spark``) runs one in this process;
* ``device`` (hearth-device, the device SDK): ``hearth device connect``.

A missing one ends the command with exit code 2 and a sentence naming the package and where it is, not
a traceback; any other missing module is a bug and raises as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

MISSING = 2  # exit code, as for a usage error: this installation cannot run the command as asked
EXTRAS = {  # a top-level module -> (the hearth-cli extra that brings it, its package)
    "hearth_analytics": ("spark", "hearth-analytics"),
    "pyspark": ("spark", "hearth-analytics"),
    "pandas": ("spark", "hearth-analytics"),
    "pyarrow": ("spark", "hearth-analytics"),
    "hearth_device": ("device", "hearth-device"),
}
WHERE = {
    "spark": "the analytics image (analytics/Dockerfile) and the dev workspace carry it",
    "device": "the dev workspace carries it; a device's own install has it",
}


@contextmanager
def needs(command: str) -> Iterator[None]:
    """Around a command's imports of an extra: exit ``MISSING`` saying which package has it."""
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if top not in EXTRAS:
            raise
        extra, package = EXTRAS[top]
        Console(stderr=True, soft_wrap=True).print(
            f"`hearth {command}` needs {top} (package {package}), which this installation does not have: "
            f"the services' image carries the operator's commands without it; {WHERE[extra]}. "
            f"Install hearth-cli[{extra}], or run `uv run hearth {command} ...` in a checkout.",
            markup=False,  # the extra's brackets are words here
        )
        raise typer.Exit(MISSING) from None
