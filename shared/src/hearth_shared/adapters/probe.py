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
from dataclasses import dataclass, field
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment


@dataclass(frozen=True)
class GroupView:
    """A consumer group as its coordinator describes it: its state (``Stable``, ``PreparingRebalance``,
    ``CompletingRebalance``, ``Empty``, ``Dead``; "" if the broker does not know the group), how many
    members it has, and per topic the partitions some member is assigned (the consumer protocol's
    assignment, which faust's assignor fills as any other)."""

    state: str = ""
    members: int = 0
    owned: dict[str, frozenset[int]] = field(default_factory=dict)


async def describe_group(bootstrap_servers: str, group: str) -> GroupView:
    """The group ``group`` as its coordinator sees it now. A member whose assignment cannot be decoded
    (none yet, during a rebalance) owns nothing."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        responses = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    for response in responses:
        described: dict[str, Any] = response.to_object()
        for g in described.get("groups", []):
            if g.get("group") != group:
                continue
            owned: dict[str, set[int]] = {}
            for member in g.get("members") or []:
                for topic, partitions in _assigned(member.get("member_assignment") or b""):
                    owned.setdefault(topic, set()).update(partitions)
            members = len(g.get("members") or [])
            return GroupView(str(g.get("state") or ""), members, {t: frozenset(p) for t, p in owned.items()})
    return GroupView()


def _assigned(assignment: bytes) -> list[tuple[str, list[int]]]:
    """(topic, partitions) pairs of a member's assignment in the consumer protocol's format (decoded, the
    pairs are plain tuples)."""
    if not assignment:
        return []
    try:
        pairs = ConsumerProtocolMemberAssignment.decode(assignment).assignment
        return [(str(topic), [int(p) for p in partitions]) for topic, partitions in pairs]
    except Exception:  # not the consumer protocol's format: this member is counted as owning nothing
        return []


async def stable_group(bootstrap_servers: str, group: str) -> str | None:
    """None if the consumer group ``group`` is Stable with at least one member, else why not."""
    view = await describe_group(bootstrap_servers, group)
    if view.state == "Stable" and view.members:
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
