"""Commands sent as a client sends them while parts are killed, and what became of each: the one count of
lost, doubled and stuck commands that the chaos tests and the scale-out drill (``hearth bench drill``)
share.

Invariants and reasons:

- Every command carries an ``Idempotency-Key``; a call that fails (no answer, a 5xx: the command API or
  what it writes to was killed) is sent again with the same key, as a client would. So a retry can never
  make a second command: the ledger keeps the command id each key got, and a key answered with another
  id is a doubled command at once (an assertion: nothing else can explain it).
- Only a 202 makes a command owed an end (``accepted``). Once every command had its time to end (its
  deadline, 30 s by default), one the query API does not know is *lost*, one it knows without a terminal
  status is *stuck*; one requested twice in the journal (``journal_check``) is *doubled*.
- Steady means paced by the clock (the n-th command at start + n / rate), each call in its own task, so
  a call held up by a kill holds up no other and the rate does not sag behind it.
- Several query-API processes are read as a load balancer would: the first that answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

import httpx

from hearth_shared.adapters.http_calls import GatedClient
from hearth_shared.schema.events import TERMINAL_STATUSES

GIVE_UP_S = 120.0  # a command that gets no 202 in this long fails the run: the command API never came back
RETRY_EVERY_S = 0.5
STATUS_READS = 16  # status reads at a time (hundreds at once time out on a busy machine and read as lost)


class NoAnswer(AssertionError):
    """A command got no 202 within ``GIVE_UP_S``: the command API never took it."""


@dataclass
class Ledger:
    """What the clients saw: every command that got a 202, and how many calls were sent again."""

    accepted: dict[str, str] = field(default_factory=dict)  # command id -> device id
    keys: dict[str, str] = field(default_factory=dict)  # Idempotency-Key -> command id
    accepted_at: dict[str, float] = field(default_factory=dict)  # command id -> monotonic time of its 202
    waited: dict[str, float] = field(default_factory=dict)  # command id -> s from its first call to its 202
    failed_calls: list[tuple[float, str]] = field(default_factory=list)  # (monotonic end, status or error)
    gave_up: list[str] = field(default_factory=list)  # devices whose command got no 202 (NoAnswer)
    retried: int = 0


async def submit(api: GatedClient, ledger: Ledger, device_id: str, target_c: float) -> str:
    """POST a thermostat command until it gets a 202, the same Idempotency-Key on every attempt; its id."""
    key = uuid.uuid4().hex
    body = {"name": "set_target_temperature", "params": {"target_c": target_c}}
    asked = time.monotonic()
    deadline = asked + GIVE_UP_S
    while True:
        try:
            response = await api.post(
                f"/v1/devices/{device_id}/commands", json=body, headers={"Idempotency-Key": key}, timeout=10
            )
            if response.status_code == 202:
                command_id = str(response.json()["command_id"])
                assert ledger.keys.setdefault(key, command_id) == command_id, f"key {key} got two commands"
                ledger.accepted[command_id] = device_id
                ledger.accepted_at[command_id] = time.monotonic()
                ledger.waited[command_id] = ledger.accepted_at[command_id] - asked
                return command_id
            assert response.status_code >= 500, f"{response.status_code}: {response.text}"
            ledger.failed_calls.append((time.monotonic(), str(response.status_code)))
        except httpx.TransportError as error:
            ledger.failed_calls.append((time.monotonic(), type(error).__name__))
        if time.monotonic() >= deadline:
            ledger.gave_up.append(device_id)
            raise NoAnswer(f"no 202 for {device_id} within {GIVE_UP_S:g} s")
        ledger.retried += 1
        await asyncio.sleep(RETRY_EVERY_S)


async def steady(
    api: GatedClient, ledger: Ledger, devices: Sequence[str], rate: float, stop: asyncio.Event
) -> None:
    """Commands at ``rate`` a second over ``devices`` in turn until ``stop``; returns once every call
    got its 202, or raises the first call's failure once every call has ended (each failure is in the
    ledger: ``gave_up``)."""
    calls: list[asyncio.Task[str]] = []
    started, n = time.monotonic(), 0
    while not stop.is_set():
        target_c = 16.0 + (n % 24) * 0.5
        calls.append(asyncio.create_task(submit(api, ledger, devices[n % len(devices)], target_c)))
        n += 1
        await asyncio.sleep(max(0.0, started + n / rate - time.monotonic()))
    ended = await asyncio.gather(*calls, return_exceptions=True)
    failed = [e for e in ended if isinstance(e, BaseException)]
    if failed:
        raise failed[0]


async def status_of(
    queries: Sequence[GatedClient], command_id: str, limit: asyncio.Semaphore | None = None
) -> str | None:
    """The command's status from the first query API that answers; None: none knows it (or answered)."""
    for query in queries:
        try:
            async with limit or contextlib.nullcontext():
                response = await query.get(f"/v1/commands/{command_id}", timeout=5)
        except httpx.TransportError:
            continue
        if response.status_code == 200:
            return str(response.json()["status"])
        if response.status_code == 404:
            return None
    return None


class EndedOtherwise(AssertionError):
    """A command awaited to converge ended otherwise (rejected, failed, expired, superseded)."""


async def converged_everywhere(queries: Sequence[GatedClient], command_id: str) -> bool:
    """Whether every query-API process answers the command as converged (a check to wait on: a probe
    after a kill is read through each, so a restarted one is seen to serve); raises ``EndedOtherwise``
    once one answers another terminal status, since it can no longer converge."""
    statuses = [await status_of([query], command_id) for query in queries]
    if ended := {s for s in statuses if s in TERMINAL_STATUSES and s != "converged"}:
        raise EndedOtherwise(f"command {command_id} ended {sorted(ended)}")
    return all(s == "converged" for s in statuses)


async def all_ended(queries: Sequence[GatedClient], ledger: Ledger, statuses: dict[str, str | None]) -> bool:
    """Read the status of every accepted command not known to have ended into ``statuses``; whether
    all have ended now (a check to wait on)."""
    pending = [c for c in ledger.accepted if statuses.get(c) not in TERMINAL_STATUSES]
    limit = asyncio.Semaphore(STATUS_READS)
    found = await asyncio.gather(*(status_of(queries, c, limit) for c in pending))
    statuses.update(zip(pending, found, strict=True))
    return all(s in TERMINAL_STATUSES for s in statuses.values())


@dataclass(frozen=True)
class Outcome:
    """The accepted commands that were lost, doubled or stuck (each empty is the goal)."""

    lost: list[str]
    doubled: list[str]
    stuck: list[str]

    @classmethod
    def of(cls, ledger: Ledger, statuses: dict[str, str | None], requested_twice: Iterable[str]) -> Outcome:
        """From the statuses read last (``all_ended``) and the commands requested twice in the journal."""
        twice = set(requested_twice)
        return cls(
            lost=sorted(c for c in ledger.accepted if statuses.get(c) is None),
            doubled=sorted(c for c in ledger.accepted if c in twice),
            stuck=sorted(c for c, s in statuses.items() if s is not None and s not in TERMINAL_STATUSES),
        )

    def among(self, commands: Collection[str]) -> Outcome:
        """Only these commands' (e.g. the ones sent around one kill)."""
        lost, doubled, stuck = (
            [c for c in found if c in commands] for found in (self.lost, self.doubled, self.stuck)
        )
        return Outcome(lost, doubled, stuck)

    @property
    def counts(self) -> dict[str, int]:
        return {"lost": len(self.lost), "doubled": len(self.doubled), "stuck": len(self.stuck)}
