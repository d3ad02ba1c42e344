"""A part of a supervised stack killed with -9 and awaited until the supervisor has it healthy again
(``hearth_devstack.supervision.part_kill``: what killed and healthy again mean), for the chaos tests."""

from __future__ import annotations

from hearth_devstack.local import LocalStack
from hearth_devstack.supervision.part_kill import Kill, healthy_again, kill_part, part_status
from tests.support.waiting import eventually


async def killed_and_back(stack: LocalStack, name: str, timeout_s: float = 180) -> Kill:
    """kill -9 the part's process, then wait until it is running and healthy again; the kill."""
    supervisor = stack.supervisor
    assert supervisor is not None, "the stack is not started"
    kill = kill_part(supervisor, name)
    await eventually(
        lambda: healthy_again(supervisor, kill),
        f"{name} healthy again",
        timeout_s=timeout_s,
        every_s=0.1,
        shown=lambda: part_status(supervisor, name),
    )
    return kill
