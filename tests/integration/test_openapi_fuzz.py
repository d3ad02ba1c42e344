"""Schemathesis over both OpenAPI documents, against the session's running services, with a home token
and an admin token: no 5xx, no status code, content type, header or body outside the document.

Bounded to run in well under a minute on two busy cores: a few examples per operation
(``MAX_EXAMPLES``), no deadline, and every wait an operation takes (``wait_s``, ``timeout_s``) at most
a fraction of a second, whether the case asks for one or leaves it to the server's default
(``bounded_waits``; what is asserted is unchanged: the answer must still be in the document). The
command API also runs statefully along its OpenAPI link: register a device, then send it commands.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks

from tests.support.platform import Platform

pytestmark = pytest.mark.integration

MAX_EXAMPLES = 10  # per operation, per mode (valid and invalid data), per token
FUZZ_HOME = "fuzz-home"
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
]
BOUNDED = settings(
    max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None
)
WAITS = ("wait_s", "timeout_s")  # seconds a request may ask the server to wait for
WAIT_S = 0.2  # the longest of them a request is sent with


@pytest.fixture  # (not module-scoped: a fetch is cheap, and the three tests may run on three workers)
def command_api_schema(platform: Platform) -> Any:
    return schemathesis.openapi.from_url(f"{platform.command_api}/openapi.json")


@pytest.fixture
def query_api_schema(platform: Platform) -> Any:
    return schemathesis.openapi.from_url(f"{platform.query_api}/openapi.json")


def headers(platform: Platform, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {platform.token(FUZZ_HOME if who == 'home' else None)}"}


def bounded_waits(case: Any) -> None:
    """Every wait the operation takes (``WAITS``) at most ``WAIT_S``: the ones the case asks for, and the
    ones it leaves out, which the server fills with its defaults (5 s for ``wait_s``, 10 s for
    ``timeout_s``). A read of a device that never reaches the version asked for, or of a campaign that
    does not exist, took that default in full: the command API's fuzz took 48 s, 10 s with these cut
    (the query API's 20 s, 12 s)."""
    for name in WAITS:
        if name not in case.operation.query:
            continue
        value = case.query.get(name)
        if value is None or (
            isinstance(value, int | float) and not isinstance(value, bool) and value > WAIT_S
        ):
            case.query[name] = WAIT_S


def call_and_validate(case: Any, base_url: str, platform: Platform) -> None:
    """The case as a home's token sends it, then as an admin's."""
    bounded_waits(case)
    for who in ("home", "admin"):
        case.call_and_validate(base_url=base_url, headers=headers(platform, who), checks=CHECKS, timeout=30)


def fuzz(schema: Any, base_url: str, platform: Platform) -> list[str]:
    """Every operation with valid and with invalid data; what failed, per operation and mode.

    (Hypothesis over each operation's strategy: schemathesis' pytest plugin does not run under pytest 9,
    whose nodes no longer have the ``_nodeid`` it rewrites.)"""
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @BOUNDED
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                call_and_validate(case, base_url, platform)

            try:
                run()
            except Unsatisfiable:  # nothing to make invalid (no parameters, no body): fine
                assert mode is GenerationMode.NEGATIVE, f"{operation.path}: no valid request"
            except Exception as exc:
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {exc}")
    return failures


def test_command_api(command_api_schema: Any, platform: Platform) -> None:
    failures = fuzz(command_api_schema, platform.command_api, platform)
    assert not failures, "\n\n".join(failures)


def test_query_api(query_api_schema: Any, platform: Platform) -> None:
    failures = fuzz(query_api_schema, platform.query_api, platform)
    assert not failures, "\n\n".join(failures)


def test_command_api_stateful(command_api_schema: Any, platform: Platform) -> None:
    """Register devices, then command them (the link from POST /v1/devices to its device's commands)."""
    auth = headers(platform, "admin")

    class Machine(command_api_schema.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: Any) -> None:
            bounded_waits(case)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": platform.command_api, "headers": auth, "timeout": 30}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS)

    Machine.run(
        settings=settings(
            max_examples=8,
            stateful_step_count=4,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
    )
