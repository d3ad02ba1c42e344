"""``hearth bench <name>``: one command per benchmark, each derived from the bench's own declaration,
added to the ``hearth`` CLI by ``register`` (this package's ``hearth.commands`` entry point).

A bench registers itself with one line in ``BENCHES`` (command name -> ``module:main``); its module
declares its parameters once, as a frozen dataclass with ``option(default, help)`` fields and a
docstring, which ``main(params)`` takes (see ``hearth_bench.harness.options``). Nothing else names them.

The commands are built when asked for (``hearth bench push ...`` imports ``hearth_bench.benches.push`` only):
bench modules import Kafka, Spark, the services..., which would cost every other ``hearth`` command
about two seconds at start if they were imported up front. ``hearth bench --help`` imports them all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import typer
from typer import _click as click  # typer >= 0.29 carries its own click: its groups hold these types
from typer.core import TyperGroup

from hearth_bench.harness.options import typer_callback

BENCHES: dict[str, str] = {
    "broker": "hearth_bench.benches.broker:main",
    "actor": "hearth_bench.benches.actor:main",
    "rebuild": "hearth_bench.benches.rebuild:main",
    "archive": "hearth_bench.benches.archive:main",
    "batch": "hearth_bench.benches.batch_replay:main",
    "stream": "hearth_bench.benches.streaming:main",
    "loop": "hearth_bench.benches.loop:main",
    "roundtrip": "hearth_bench.benches.roundtrip:main",
    "gateway": "hearth_bench.benches.gateway:main",
    "mqtt-clients": "hearth_bench.benches.mqtt_clients:main",
    "memory": "hearth_bench.benches.memory:main",
    "push": "hearth_bench.benches.push:main",
    "campaign": "hearth_bench.benches.campaign:main",
    "automations": "hearth_bench.benches.automation_load:main",
    "reads": "hearth_bench.benches.reads:main",
    "restart": "hearth_bench.benches.restart:main",
    "drill": "hearth_bench.benches.drill:main",
    "mixed": "hearth_bench.benches.mixed:main",
    "connections": "hearth_bench.benches.connections:main",
    "learn": "hearth_bench.benches.learn:main",
}


def bench_main(name: str) -> Callable[[Any], object]:
    """The ``main(params)`` registered under ``name``, imported."""
    module, _, attribute = BENCHES[name].partition(":")
    main: Callable[[Any], object] = getattr(importlib.import_module(module), attribute)
    return main


def bench_command(name: str) -> click.Command:
    """The click command of one bench, derived from its dataclass (through typer, for its help and
    conversions)."""
    one = typer.Typer(add_completion=False)
    one.command(name)(typer_callback(bench_main(name)))
    command = typer.main.get_command(one)
    command.name = name
    return command


class BenchGroup(TyperGroup):
    """The ``bench`` group: lists ``BENCHES`` and builds a command only when it is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(BENCHES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in BENCHES:
            return None
        if cmd_name not in self.commands:
            self.commands[cmd_name] = bench_command(cmd_name)
        return self.commands[cmd_name]


bench_app = typer.Typer(
    cls=BenchGroup,
    help="Benchmarks; figures go to bench/results/ and docs/BENCHMARKS.md.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``bench`` group to the ``hearth`` CLI (entry point ``hearth.commands``)."""
    app.add_typer(bench_app, name="bench")
