"""What many tests need: waiting for a condition, and inbox requests made with sensible defaults.

``eventually`` is the one wait loop of the suite: a condition polled until it holds or a deadline passes,
with a message that says what was awaited; ``poll_until`` is the same loop for a value fetched until it
is ready (a view that is eventually consistent). Request factories build the inbox records a device or
the command API would send, so a test names only what it is about.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from hearth_shared.schema.events import (
    AcknowledgeCommand,
    RegisterDevice,
    ReportState,
    SubmitCommand,
    new_id,
    utcnow,
)

Check = Callable[[], bool] | Callable[[], Awaitable[bool]]
T = TypeVar("T")
P = TypeVar("P")


def payload_of(fact: object, kind: type[P]) -> P:
    """The payload of a fact (or a decided change), checked to be a ``kind``."""
    found = getattr(fact, "payload", None)
    assert isinstance(found, kind), f"{fact!r} carries no {kind.__name__}"
    return found


async def eventually(check: Check, what: str, *, timeout_s: float = 60.0, every_s: float = 0.05) -> float:
    """Wait until ``check()`` (a function or a coroutine function) is true; fail saying ``what`` if it
    is not within ``timeout_s``. Returns the seconds it took."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return loop.time() - started
        if loop.time() >= started + timeout_s:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(every_s)


async def poll_until(
    fetch: Callable[[], Awaitable[T]],
    ready: Callable[[T], bool],
    what: str,
    *,
    timeout_s: float = 60.0,
    every_s: float = 0.1,
) -> T:
    """``await fetch()`` until ``ready`` holds for what it returns, and return that; fail saying ``what``
    and showing the last value if it does not within ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        value = await fetch()
        if ready(value):
            return value
        if loop.time() >= deadline:
            shown = getattr(value, "text", value)  # an HTTP response: its body
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}; last: {shown!r:.2000}")
        await asyncio.sleep(every_s)


def register_request(
    device_id: str,
    *,
    home_id: str = "home",
    device_type: str = "thermostat",
    name: str | None = None,
    at: datetime | None = None,
) -> RegisterDevice:
    return RegisterDevice(
        request_id=new_id(),
        device_id=device_id,
        sent_at=at or utcnow(),
        home_id=home_id,
        device_type=device_type,
        name=name or device_id,
    )


def report_request(device_id: str, seq: int, *, at: datetime | None = None, **state: Any) -> ReportState:
    at = at or utcnow()
    return ReportState(
        request_id=new_id(), device_id=device_id, sent_at=at, device_seq=seq, device_time=at, state=state
    )


def command_request(
    device_id: str,
    name: str,
    params: dict[str, Any],
    *,
    home_id: str = "home",
    at: datetime | None = None,
    expires_in_s: float = 300.0,
    command_id: uuid.UUID | None = None,
) -> SubmitCommand:
    at = at or utcnow()
    return SubmitCommand(
        request_id=new_id(),
        device_id=device_id,
        sent_at=at,
        home_id=home_id,
        command_id=command_id or uuid.uuid4(),
        name=name,
        params=params,
        expires_at=at + timedelta(seconds=expires_in_s),
    )


def ack_request(
    device_id: str, command_id: uuid.UUID, *, ok: bool = True, reason: str = ""
) -> AcknowledgeCommand:
    return AcknowledgeCommand(
        request_id=new_id(),
        device_id=device_id,
        sent_at=utcnow(),
        command_id=command_id,
        ok=ok,
        reason=reason,
    )
