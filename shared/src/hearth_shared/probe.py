"""Health probes for the parts that serve no HTTP, as compose runs them: exit 0 healthy, 1 not (the reason
on stderr). Each service has a ``probe`` module with its own check (``python -m hearth_device_actor.probe``,
``hearth_device_gateway.probe``, ``hearth_read_models.probe``), so that what waits for a service waits for
it to work, not merely to have started; this module holds what they share. The probes live in the
services' own packages because the services' image carries nothing else (the ``hearth`` CLI and the
local stack are tools, never in that image).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient


async def stable_group(bootstrap_servers: str, group: str) -> str | None:
    """None if the consumer group ``group`` is Stable with at least one member, else why not."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        responses = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    for response in responses:
        described: dict[str, Any] = response.to_object()
        for g in described.get("groups", []):
            if g.get("group") == group and g.get("state") == "Stable" and g.get("members"):
                return None
    return f"the consumer group {group} has no stable member"


def run_probe(check: Callable[[], Coroutine[Any, Any, str | None]], timeout_s: float = 20.0) -> int:
    """Run ``check`` (None: healthy, else the reason) and return the probe's exit code."""
    try:
        problem = asyncio.run(asyncio.wait_for(check(), timeout_s))
    except Exception as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        print(problem, file=sys.stderr)
        return 1
    return 0
