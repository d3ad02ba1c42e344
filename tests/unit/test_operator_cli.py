"""The operator's `hearth` as the services' image carries it: every command there answers `--help` with
only the image's packages installed, and a command that needs more says which package has it.

The image holds the lock file's dependency set of the workspace root (``image_packages``, as
test_image_dependencies.py walks it): hearth-cli, the services and their libraries. A fresh interpreter of
the dev environment is made to look like it, both ways a package shows: importing a top-level module of
a distribution outside that set fails as it would there (ModuleNotFoundError), and those distributions
are not found by ``importlib.metadata``, so no dev package's ``hearth.commands`` entry point is seen. In
it, the console script ``hearth`` is loaded from its entry point and ``--help`` run for every command
and group of its tree.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest

from hearth.cli import app
from tests.unit.test_image_dependencies import ROOT, image_packages

pytestmark = pytest.mark.unit

OPERATOR_COMMANDS = {"token", "device", "archive", "campaign", "automation", "analytics", "rebuild", "verify"}
DEV_COMMANDS = {"up", "down", "status", "simulate", "bench"}  # hearth-devstack, -simulator, -bench

# Runs in the subprocess: argv[1] the hidden top-level modules, argv[2] the image's distributions, argv[3]
# the commands to run (each a list of words; empty: every command of the tree with --help).
IMAGE_VIEW = r"""
import importlib.abc, importlib.metadata, json, re, sys
from importlib.machinery import PathFinder

HIDDEN, IMAGE, RUNS = set(json.loads(sys.argv[1])), set(json.loads(sys.argv[2])), json.loads(sys.argv[3])
refused = []

class ImageView(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in HIDDEN:
            refused.append(fullname)
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return PathFinder.find_spec(fullname, path, target)

    def find_distributions(self, context=importlib.metadata.DistributionFinder.Context()):
        for dist in PathFinder.find_distributions(context):
            if re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower() in IMAGE:
                yield dist

sys.meta_path[sys.meta_path.index(PathFinder)] = ImageView()

(script,) = importlib.metadata.entry_points(group="console_scripts", name="hearth")
cli = sys.modules[script.load().__module__]
import typer
from typer.testing import CliRunner

root = typer.main.get_command(cli.app)

def tree(group, path):
    ctx = group.make_context("hearth", [], resilient_parsing=True)
    for name in group.list_commands(ctx):
        yield [*path, name]
        command = group.get_command(ctx, name)
        if hasattr(command, "list_commands"):
            yield from tree(command, [*path, name])

runs = RUNS or [[*words, "--help"] for words in tree(root, []) if words != ["analytics"]]
results = []
for words in runs:
    result = CliRunner().invoke(cli.app, words, terminal_width=200)
    results.append({"words": words, "code": result.exit_code, "output": result.output})
top = sorted(root.list_commands(root.make_context("hearth", [], resilient_parsing=True)))
print(json.dumps({"top": top, "results": results, "refused": refused}))
"""


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _hidden_modules(image: set[str]) -> set[str]:
    """The top-level modules of every installed distribution, and every workspace member, outside the
    image."""
    hidden = {
        module
        for module, owners in packages_distributions().items()
        if not any(_normalised(owner) in image for owner in owners)
    }
    for pyproject in [*ROOT.glob("*/pyproject.toml"), *ROOT.glob("services/*/pyproject.toml")]:
        member = tomllib.loads(pyproject.read_text())
        if _normalised(member["project"]["name"]) not in image:
            wheel = member["tool"]["hatch"]["build"]["targets"]["wheel"]
            hidden |= {Path(package).name for package in wheel["packages"]}
    return hidden


def in_the_image(*runs: list[str]) -> dict[str, Any]:
    image = image_packages()
    hidden = _hidden_modules(image)
    assert {"hearth_analytics", "pyspark", "pandas", "hearth_devstack", "hearth_bench", "psutil"} <= hidden
    argv = [json.dumps(sorted(hidden)), json.dumps(sorted(image)), json.dumps(list(runs))]
    done = subprocess.run(
        [sys.executable, "-c", IMAGE_VIEW, *argv], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_every_operator_command_answers_help_with_the_images_packages_only() -> None:
    seen = in_the_image()
    assert set(seen["top"]) == OPERATOR_COMMANDS, "the image's `hearth` has the operator's commands only"
    failed = [r for r in seen["results"] if r["code"] != 0 or "Usage:" not in r["output"]]
    assert not failed, failed
    helped = {" ".join(r["words"][:-1]) for r in seen["results"]}
    assert {"token create", "token revoke", "rebuild", "verify", "archive verify", "device quarantine",
            "device connect", "campaign", "automation backtest"} <= helped  # fmt: skip
    assert seen["refused"] == [], "a command imported a package the image does not carry up front"


def test_a_command_needing_spark_exits_2_naming_the_package_that_has_it(tmp_path: Path) -> None:
    seen = in_the_image(["analytics", "--help"], ["archive", "status", "--stack-dir", str(tmp_path)])
    for run in seen["results"]:
        assert run["code"] == 2, run
        assert "hearth-analytics" in run["output"] and "hearth-cli[spark]" in run["output"], run
    assert {name.partition(".")[0] for name in seen["refused"]} == {"hearth_analytics"}


def test_the_dev_workspace_has_every_command_of_the_contract() -> None:
    import typer
    from typer.core import TyperGroup

    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    names = set(root.list_commands(root.make_context("hearth", [], resilient_parsing=True)))
    assert names == OPERATOR_COMMANDS | DEV_COMMANDS
