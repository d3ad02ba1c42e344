"""The automation engine's effects, collected while it evaluates a group of facts and sent together by
``flush``: one broker round trip for the commands and one for the facts per group, where awaiting each
run's command, then its run fact, cost two round trips per run (about 10 ms: 3,500 facts/s when one in
20 triggered).

Crash safety, the invariant the engine states: a run's commands are on the inbox (acked) before its
``automation.ran`` fact is appended. ``flush`` sends every command collected and waits for all their
acks, then appends every fact collected, in the order they were collected (a home's facts share a
partition, so the home journal keeps that order), then runs the follow-ups (notifications: sent only
once their run fact is in the journal). A command collected after a fact is sent before it too; no fact
needs a later command, and what a fact needs, its run's commands, is collected before it. The engine
collects a run whole (no await between its commands and its fact), so every flush holds whole runs.

A failed send fails the flush, and nothing after it is written: no fact when a command failed, no
follow-up when a fact failed, and no later flush either (``broken``): the engine's state is then ahead
of the journals, and only a restart, which replays them, makes it true again (every id is derived, so a
command sent twice is recorded once by the device actor). A flush cancelled while it sends (the process
stopping) is broken alike: what it held may or may not be on the broker. Flushes run one at a time, in
the order they were asked for (the journal feed's and the timers' tick may ask at once).

``unsettled`` says whether the engine's state holds a decision that is not on the broker yet (collected,
being sent, or lost with a broken flush): the service takes no snapshot then, since a snapshot must
never hold a run whose commands and fact a crash could still lose.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from hearth_shared.domain.home_facts import HomeFact
from hearth_shared.schema.events import SubmitCommand


class EnginePath(Protocol):
    """Where the engine's effects go. Each returns once the broker has every item (acks=all), and raises
    if any could not be written."""

    async def send_requests(self, requests: Sequence[SubmitCommand]) -> None: ...

    async def append_all(self, facts: Sequence[HomeFact]) -> None: ...


class FlushFailed(RuntimeError):
    """A flush could not send everything; nothing collected after the failure was written."""


class EffectBatch:
    def __init__(self, path: EnginePath) -> None:
        self.path = path
        self.commands: list[SubmitCommand] = []
        self.facts: list[HomeFact] = []
        self.after: list[Callable[[], None]] = []
        self.broken: BaseException | None = None
        self._one_at_a_time = asyncio.Lock()

    def command(self, request: SubmitCommand) -> None:
        self.commands.append(request)

    def fact(self, fact: HomeFact, then: Callable[[], None] | None = None) -> None:
        """Collect ``fact``; ``then`` runs once it (and everything collected before it) is written."""
        self.facts.append(fact)
        if then is not None:
            self.after.append(then)

    def __len__(self) -> int:
        return len(self.commands) + len(self.facts)

    def unsettled(self) -> str | None:
        """Why not every decision collected so far is on the broker, or None when all are."""
        if self.broken is not None:
            return f"a flush failed ({self.broken!r}): only a restart replays what it lost"
        if self._one_at_a_time.locked():
            return "a flush is sending"
        if self:
            return f"{len(self.commands)} commands and {len(self.facts)} facts are not sent yet"
        return None

    async def flush(self) -> None:
        """Send what was collected (commands, then facts, then follow-ups); raises ``FlushFailed``."""
        async with self._one_at_a_time:
            if self.broken is not None:
                raise FlushFailed(
                    "an earlier flush failed; only a restart replays what it lost"
                ) from self.broken
            commands, facts, after = self.commands, self.facts, self.after
            self.commands, self.facts, self.after = [], [], []
            try:
                if commands:
                    await self.path.send_requests(commands)
                if facts:
                    await self.path.append_all(facts)
            except BaseException as error:  # a cancellation too: whether it was sent is not known
                self.broken = error
                if not isinstance(error, Exception):
                    raise
                raise FlushFailed(
                    f"could not send {len(commands)} commands and {len(facts)} facts: {error!r}"
                ) from error
        for follow_up in after:
            follow_up()
