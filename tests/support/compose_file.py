"""compose.yaml as the static tests read it: its services, their commands and environment, what each
image carries, and the HEARTH_* names the settings classes read. tests/unit/test_compose.py checks the file
itself with these; tests/unit/test_deploy.py checks the Kubernetes manifests against the same file, so a
service, setting or health check compose has and Kubernetes lacks fails there."""

from __future__ import annotations

import importlib
import shlex
from pathlib import Path
from typing import Any

import yaml
from pydantic_settings import BaseSettings

from hearth_shared.adapters.settings import StackSettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
WORKSPACE_PACKAGES = [
    "hearth_shared",
    "hearth_command_api",
    "hearth_device_actor",
    "hearth_read_models",
    "hearth_analytics",
    "hearth_device_gateway",
    "hearth_automations",
    "hearth_campaigns",
]
# What the services' image (./Dockerfile, `uv sync --no-dev`) installs; the Spark image adds analytics.
IMAGE_PACKAGES = {
    "hearth:0.1.0": {
        "hearth_shared",
        "hearth_command_api",
        "hearth_device_actor",
        "hearth_read_models",
        "hearth_device_gateway",
        "hearth_automations",
        "hearth_campaigns",
        "hearth",  # the operator's `hearth` (hearth-cli): `docker compose run --rm init hearth token ...`
    },
    "hearth-spark:0.1.0": {"hearth_shared", "hearth_analytics"},
}


def ours() -> dict[str, dict[str, Any]]:
    """Services built from this repository (the ones that run Hearth code)."""
    return {name: svc for name, svc in SERVICES.items() if "build" in svc}


def command(svc: dict[str, Any]) -> list[str]:
    cmd = svc.get("command", [])
    return shlex.split(cmd) if isinstance(cmd, str) else list(cmd)


def env_values(svc: dict[str, Any]) -> dict[str, str]:
    """A service's environment as written (``${...}`` interpolations left as they are)."""
    env = svc.get("environment", {})
    if isinstance(env, dict):
        return {name: "" if value is None else str(value) for name, value in env.items()}
    values = {}
    for item in env:
        name, _, value = str(item).partition("=")
        values[name] = value
    return values


def env_names(svc: dict[str, Any]) -> set[str]:
    return set(env_values(svc))


def known_env_names() -> set[str]:
    """HEARTH_* names some settings class reads: its env prefix + a field name."""
    classes: set[type[BaseSettings]] = {StackSettings}
    for package in WORKSPACE_PACKAGES:
        try:
            module = importlib.import_module(f"{package}.settings")
        except ModuleNotFoundError as e:
            if e.name in (package, f"{package}.settings"):
                continue  # no settings module (yet)
            raise
        classes |= {v for v in vars(module).values() if isinstance(v, type) and issubclass(v, BaseSettings)}
    return {
        (cls.model_config.get("env_prefix") or "").upper() + field.upper()
        for cls in classes
        for field in cls.model_fields
    }
