"""``hearth bench``: each bench's command derived from its parameters' dataclass
(hearth_bench.harness.options), and the registry of benches (hearth_bench.commands) that builds them only
when asked."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from hearth.cli import app
from hearth_bench.commands import BENCHES, bench_command
from hearth_bench.harness.options import bench_options, option, typer_callback

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class ToyBench:
    """A toy bench: what it measures against what."""

    devices: int = option(10, "Devices of the toy")
    duration_s: float = option(2.5, "Seconds of the toy", flag="--duration")
    rates: tuple[float, ...] = option((1.0, 2.0), "Rates (repeat)", flag="--rate")
    compression: bool = option(True, "Compress")
    bootstrap: str | None = option(None, "A running broker")
    profile: Path | None = option(None, "Where a profile goes")


ran: list[ToyBench] = []


def toy_main(params: ToyBench) -> dict[str, Any]:
    ran.append(params)
    return {}


def _invoke(*args: str) -> ToyBench:
    app = typer.Typer(add_completion=False)
    app.command("toy")(typer_callback(toy_main))
    app.command("other")(lambda: None)  # two commands, so "toy" is a subcommand as under `hearth bench`
    ran.clear()
    result = CliRunner().invoke(app, ["toy", *args])
    assert result.exit_code == 0, result.output
    (params,) = ran
    return params


def test_no_option_given_runs_the_dataclass_defaults() -> None:
    assert _invoke() == ToyBench()


def test_every_field_is_an_option_by_its_name_or_its_declared_flag() -> None:
    params = _invoke(
        "--devices", "3", "--duration", "0.5", "--rate", "7", "--rate", "8.5", "--no-compression",
        "--bootstrap", "127.0.0.1:1", "--profile", "/tmp/p.txt",
    )  # fmt: skip
    assert params == ToyBench(3, 0.5, (7.0, 8.5), False, "127.0.0.1:1", Path("/tmp/p.txt"))


def test_the_help_is_the_dataclass_docstring_and_each_field_s_help() -> None:
    app = typer.Typer(add_completion=False)
    app.command("toy")(typer_callback(toy_main))
    app.command("other")(lambda: None)
    shown = CliRunner().invoke(app, ["toy", "--help"], terminal_width=200).output
    assert "A toy bench: what it measures against what." in shown
    for text in ("--devices", "Devices of the toy", "--duration", "--rate", "--no-compression", "--profile"):
        assert text in shown
    assert "--duration-s" not in shown


def test_options_keep_field_order_and_map_repeated_fields_to_lists() -> None:
    options = bench_options(ToyBench)
    assert [o.name for o in options] == [
        "devices",
        "duration_s",
        "rates",
        "compression",
        "bootstrap",
        "profile",
    ]
    rates = options[2]
    assert (rates.flags, rates.annotation, rates.default, rates.repeated) == (
        ("--rate",),
        list[float],
        [1.0, 2.0],
        True,
    )
    assert options[3].flags == ()  # typer's own --compression/--no-compression


@dataclass(frozen=True)
class Undeclared:
    """A field without its help."""

    devices: int = 10


@dataclass
class Mutable:
    """Not frozen."""

    devices: int = option(10, "Devices")


@dataclass(frozen=True)
class Undocumented:
    devices: int = option(10, "Devices")


def test_a_declaration_that_breaks_the_pattern_is_refused() -> None:
    def run_undeclared(params: Undeclared) -> None: ...
    def run_mutable(params: Mutable) -> None: ...
    def run_undocumented(params: Undocumented) -> None: ...
    def run_loose(devices: int) -> None: ...

    for main, said in (
        (run_undeclared, "not declared with option"),
        (run_mutable, "frozen dataclass"),
        (run_undocumented, "needs a docstring"),
        (run_loose, "frozen dataclass"),
    ):
        with pytest.raises(TypeError, match=said):
            typer_callback(main)


# The options `hearth bench` had when each command was written by hand: the names the README,
# docs/BENCHMARKS.md and people's shell history use. A bench may add options; none of these may go.
EARLIER_OPTIONS = {
    "broker": {"--bootstrap", "--messages", "--size"},
    "actor": {"--bootstrap", "--devices", "--events"},
    "rebuild": {"--events", "--devices", "--batch-size"},
    "archive": {"--events", "--devices"},
    "batch": {"--events", "--devices"},
    "stream": {"--rate", "--step", "--warmup", "--devices", "--rollup-trigger", "--train-trigger"},
    "loop": {"--thermostats", "--drifting", "--rate", "--drift", "--train-trigger", "--min-count"},
    "roundtrip": {"--devices", "--rate", "--duration", "--floor-duration", "--telemetry-rate"},
    "gateway": {"--devices", "--reports", "--connections", "--roundtrip", "--no-roundtrip", "--duration",
                "--profile"},
    "memory": {"--size", "--built", "--worker-devices"},
    "push": {"--clients", "--devices", "--rate", "--duration", "--compression", "--no-compression"},
    "reads": {"--devices", "--concurrency", "--duration", "--floor-duration", "--telemetry-rate"},
    "campaign": {"--devices", "--waves", "--soak", "--install"},
    "learn": {"--homes", "--weeks", "--train-weeks", "--seed", "--workers"},
}  # fmt: skip


def test_every_registered_bench_builds_its_command_with_every_earlier_option() -> None:
    assert set(BENCHES) >= set(EARLIER_OPTIONS)
    for name in BENCHES:
        command = bench_command(name)
        flags = {flag for p in command.params for flag in (*p.opts, *p.secondary_opts)}
        assert flags >= EARLIER_OPTIONS.get(name, set()), (name, EARLIER_OPTIONS[name] - flags)
        assert command.help, name


def test_the_bench_group_lists_every_bench() -> None:
    shown = CliRunner().invoke(app, ["bench", "--help"], terminal_width=200).output
    for name in BENCHES:
        assert f" {name} " in shown


def test_the_cli_imports_no_bench_until_one_is_asked_for() -> None:
    code = "import sys, hearth.cli; print(sorted(m for m in sys.modules if m.startswith('hearth_bench.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['hearth_bench.commands', 'hearth_bench.harness', 'hearth_bench.harness.options']"
