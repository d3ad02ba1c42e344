"""compose.yaml checked statically (no Docker engine here): the Compose specification's own JSON schema,
then what the schema cannot know: tags, ports, healthchecks, dependencies, commands, env, COPY sources."""

from __future__ import annotations

import importlib.util
import json
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.support.compose_file import (
    COMPOSE,
    IMAGE_PACKAGES,
    ROOT,
    SERVICES,
    command,
    env_names,
    known_env_names,
    ours,
)

pytestmark = pytest.mark.unit

ONE_SHOT = {"init"}  # runs to completion; everything else runs for good
LONG_RUNNING = sorted(set(SERVICES) - ONE_SHOT)
RESTARTING = {"always", "unless-stopped", "on-failure"}
PUBLISHED = {"command-api": 8000, "query-api": 8001, "kafka": 9092, "mosquitto": 1883}
SCHEMA = "check_jsonschema/builtin_schemas/vendor/compose-spec.json"


def _host_ports(svc: dict[str, Any]) -> set[int]:
    ports = set()
    for port in svc.get("ports", []):
        if isinstance(port, dict):
            ports.add(int(port["published"]))
        else:
            parts = str(port).split("/")[0].split(":")
            ports.add(int(parts[-2] if len(parts) > 1 else parts[0]))
    return ports


def test_compose_matches_the_compose_specification_schema() -> None:
    # The compose-spec project's schema as vendored by check-jsonschema (read as a file, not imported).
    schema = json.loads(Path(str(distribution("check-jsonschema").locate_file(SCHEMA))).read_text())
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in Draft202012Validator(schema).iter_errors(COMPOSE)
    ]
    assert errors == []


def test_every_image_has_an_explicit_tag() -> None:
    for name, svc in SERVICES.items():
        image = svc.get("image")
        assert image, f"{name} names no image"
        repo, _, tag = image.rpartition(":")
        assert repo and "/" not in tag and tag not in ("", "latest"), f"{name}: {image!r} has no explicit tag"


def test_api_and_broker_ports_are_published() -> None:
    for name, port in PUBLISHED.items():
        assert port in _host_ports(SERVICES[name]), f"{name} does not publish {port}"


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_every_long_running_service_has_a_healthcheck(name: str) -> None:
    check = SERVICES[name].get("healthcheck", {})
    assert check.get("test") and not check.get("disable"), f"{name} has no healthcheck"
    assert check["test"][0] in ("CMD", "CMD-SHELL"), f"{name}: healthcheck test {check['test']!r}"


def test_apis_probe_healthz() -> None:
    for api in ("command-api", "query-api"):
        assert "/healthz" in " ".join(SERVICES[api]["healthcheck"]["test"]), f"{api} does not probe /healthz"


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_every_long_running_service_restarts_when_it_dies(name: str) -> None:
    assert SERVICES[name].get("restart") in RESTARTING, f"{name}: restart {SERVICES[name].get('restart')!r}"


def test_one_shot_services_do_not_restart() -> None:
    for name in ONE_SHOT:
        assert SERVICES[name].get("restart") == "no", f"{name} restarts, so it never completes"


def test_dependencies_wait_for_health_or_completion() -> None:
    for name, svc in SERVICES.items():
        deps = svc.get("depends_on", {})
        assert isinstance(deps, dict), f"{name}: depends_on as a list waits only for the start"
        for target, dep in deps.items():
            assert target in SERVICES, f"{name} depends on unknown service {target}"
            wanted = "service_completed_successfully" if target in ONE_SHOT else "service_healthy"
            assert dep.get("condition") == wanted, f"{name} -> {target}: condition {dep.get('condition')!r}"
            if wanted == "service_healthy":
                assert "healthcheck" in SERVICES[target], f"{name} waits for {target}: no healthcheck"


@pytest.mark.parametrize("name", sorted(n for n in ours() if n not in ONE_SHOT))
def test_python_healthchecks_run_workspace_code(name: str) -> None:
    """A probe run as `python -m <package>.probe` names a service's probe module, in the services' image."""
    test = SERVICES[name]["healthcheck"]["test"]
    if test[:3] != ["CMD", "python", "-m"]:
        return
    module = test[3]
    assert SERVICES[name]["image"] == "hearth:0.1.0", f"{name}: the probes are in the hearth image only"
    assert module.split(".")[0] in IMAGE_PACKAGES["hearth:0.1.0"], f"{name}: {module} is not in the image"
    assert module.endswith(".probe") and importlib.util.find_spec(module), f"{name}: no probe module {module}"


@pytest.mark.parametrize("name", sorted(ours()))
def test_service_commands_resolve_to_workspace_code(name: str) -> None:
    cmd = command(SERVICES[name])
    if cmd[:2] == ["python", "-m"]:
        module = cmd[2]
        image = SERVICES[name]["image"]
        assert module.split(".")[0] in IMAGE_PACKAGES[image], f"{name}: {module} is not in the image {image}"
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            spec = None
        assert spec is not None, f"{name}: no module {module}"
        if spec.submodule_search_locations is not None:  # a package: `python -m` runs its __main__
            assert importlib.util.find_spec(f"{module}.__main__"), f"{name}: {module} has no __main__"
    elif not cmd[0].startswith("/opt/spark/"):
        pytest.fail(f"{name}: unexpected command {cmd}")


@pytest.mark.parametrize("name", sorted(ours()))
def test_service_env_vars_are_hearth_settings(name: str) -> None:
    known = known_env_names()
    for var in env_names(SERVICES[name]):
        assert var.startswith("HEARTH_"), f"{name}: {var} is not a HEARTH_ setting"
        assert var in known, f"{name}: no settings class reads {var}"


@pytest.mark.parametrize("dockerfile", sorted({svc["build"]["dockerfile"] for svc in ours().values()}))
def test_dockerfile_copy_sources_exist(dockerfile: str) -> None:
    context = ROOT  # both images build from the repository root
    assert all(svc["build"]["context"] == "." for svc in ours().values())
    copies = [
        line.split()[1:]
        for line in (context / dockerfile).read_text().splitlines()
        if line.startswith("COPY ") and "--from=" not in line
    ]
    assert copies, f"{dockerfile} copies nothing"
    for args in copies:
        for source in [a for a in args if not a.startswith("--")][:-1]:
            assert (context / source).exists(), f"{dockerfile}: COPY source {source} does not exist"


def test_the_services_image_copies_every_workspace_member() -> None:
    """`uv sync --frozen` in the image needs every workspace member's pyproject.toml to find the workspace
    (sdk/ was once missed); the members it does not install need nothing more (tried by hand: a copy with
    only their pyproject.toml files syncs the services)."""
    import tomllib

    members = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]["members"]
    copied = {
        line.split()[1].rstrip("/")
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ") and "--from=" not in line
    }
    for member in members:
        top = member.split("/")[0]
        assert top in copied or f"{top}/pyproject.toml" in copied, f"no COPY of {top}/ ({member})"
