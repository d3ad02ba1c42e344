"""Benchmark results: one JSON file per bench in bench/results/, and its table in docs/BENCHMARKS.md.

A result is a dict with a ``title``, ``rows`` (a list of flat dicts, one table row each, the keys of the
first row as columns) and any other figures worth keeping; ``write_result`` adds the machine and date.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
from pathlib import Path
from typing import Any

import psutil

from hearth_devstack.servers.kafka import KAFKA_VERSION
from hearth_devstack.workspace import REPO_ROOT

REPO = REPO_ROOT

INTRO = """# Benchmarks

Measured by `hearth bench <name>`; each section below is regenerated from `bench/results/<name>.json`.
Every figure names the machine it was measured on. Throughputs of Hearth's own paths are given as ratios
against a floor measured in the same run on the same machine (the `broker` bench: raw aiokafka produce and
consume against the same local Kafka broker), so figures from different machines compare by their ratios.
"""


def machine() -> dict[str, Any]:
    return {
        "node": platform.node(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "kafka": KAFKA_VERSION,
        "load_1m": round(os.getloadavg()[0], 1),  # other work on the machine while the bench ran
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_result(name: str, result: dict[str, Any], root: Path = REPO) -> Path:
    """Write bench/results/<name>.json and regenerate the bench's section of docs/BENCHMARKS.md."""
    record = {
        "bench": name,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        **result,
    }
    path = root / "bench" / "results" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    _update_docs(root / "docs" / "BENCHMARKS.md", name, render_section(record))
    return path


def ratio_rows(unit: str, floor: tuple[str, float], *paths: tuple[str, float]) -> list[dict[str, Any]]:
    """Table rows: the floor's rate, then each path's, each with its ratio to the floor."""
    base = floor[1]
    return [{"path": p, unit: round(rate), "ratio": round(rate / base, 3)} for p, rate in (floor, *paths)]


def render_section(record: dict[str, Any]) -> str:
    m = record["machine"]
    lines = [
        f"## {record['bench']}: {record.get('title', '')}".rstrip(": "),
        "",
        f"{record['date'][:10]} on `{m['node']}`: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, "
        f"Python {m['python']}, Kafka {m['kafka']}, load {m['load_1m']}.",
        "",
    ]
    rows = record.get("rows", [])
    if rows:
        columns = list(rows[0])
        lines.append("| " + " | ".join(columns) + " |")
        lines.append("|" + "|".join("---" for _ in columns) + "|")
        lines.extend("| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in rows)
    if record.get("notes"):
        lines += ["", record["notes"]]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _update_docs(path: Path, name: str, section: str) -> None:
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{section}\n{end}"
    text = path.read_text() if path.exists() else INTRO
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
