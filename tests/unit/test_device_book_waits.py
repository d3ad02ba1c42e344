"""The command API's ``?wait=``: ``DeviceBook.wait_for`` wakes a waiter once, when a fact reaches the
status it waits for (or a terminal one), not at every step of the command's lifecycle; a timeout
answers the status so far; nothing is left behind in the view (pure, in memory: no broker)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from hearth_command_api.service.device_book import DeviceBook
from hearth_shared.schema.events import (
    CommandAccepted,
    CommandAcknowledged,
    CommandConverged,
    CommandDispatched,
    CommandRef,
    CommandRejected,
    CommandRejectedPayload,
    Event,
    new_id,
    utcnow,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.unit

DEVICE = "h1-thermostat"


def _fact(kind: type[Event], command_id: uuid.UUID, version: int) -> Event:
    now = utcnow()
    payload: CommandRef | CommandRejectedPayload = CommandRef(command_id=command_id)
    if kind is CommandRejected:
        payload = CommandRejectedPayload(command_id=command_id, reason="out_of_range", message="too hot")
    return kind(  # type: ignore[call-arg]
        event_id=new_id(),
        device_id=DEVICE,
        home_id="h1",
        version=version,
        occurred_at=now,
        recorded_at=now,
        correlation_id=command_id,
        payload=payload,
    )


def _view(command_id: uuid.UUID) -> DeviceBook:
    view = DeviceBook()
    view.remember_device(DEVICE, "h1", "thermostat")
    view.remember_command(command_id, DEVICE, b"print", utcnow() + timedelta(seconds=30))
    return view


async def test_a_waiter_wakes_once_at_its_status_not_at_every_step() -> None:
    command_id = uuid.uuid4()
    view = _view(command_id)
    converged = asyncio.create_task(view.wait_for(command_id, "converged", 5))
    dispatched = asyncio.create_task(view.wait_for(command_id, "dispatched", 5))
    entry = view.commands[command_id]
    await eventually(lambda: len(entry.waiters) == 2, "both waits registered", timeout_s=5)

    view.apply(_fact(CommandAccepted, command_id, 2))
    await asyncio.sleep(0.01)
    assert not converged.done() and not dispatched.done() and len(entry.waiters) == 2

    view.apply(_fact(CommandDispatched, command_id, 3))
    assert await asyncio.wait_for(dispatched, 5) == ("dispatched", False)
    assert not converged.done() and len(entry.waiters) == 1

    view.apply(_fact(CommandAcknowledged, command_id, 4))
    await asyncio.sleep(0.01)
    assert not converged.done()
    view.apply(_fact(CommandConverged, command_id, 5))
    assert await asyncio.wait_for(converged, 5) == ("converged", False)
    assert entry.waiters == []


async def test_a_terminal_status_ends_a_wait_and_a_timeout_answers_the_status_so_far() -> None:
    command_id, other = uuid.uuid4(), uuid.uuid4()
    view = _view(command_id)
    view.remember_command(other, DEVICE, b"print", utcnow() + timedelta(seconds=30))
    rejected = asyncio.create_task(view.wait_for(command_id, "converged", 5))
    await eventually(lambda: bool(view.commands[command_id].waiters), "the wait registered", timeout_s=5)
    view.apply(_fact(CommandRejected, command_id, 2))
    assert await asyncio.wait_for(rejected, 5) == ("rejected", False)

    view.apply(_fact(CommandAccepted, other, 3))
    assert await view.wait_for(other, "converged", 0.05) == ("accepted", True)
    assert view.commands[other].waiters == []
    assert await view.wait_for(other, "accepted", 0.05) == ("accepted", False)  # reached: no wait


async def test_a_cancelled_wait_leaves_no_waiter_behind() -> None:
    command_id = uuid.uuid4()
    view = _view(command_id)
    waiting = asyncio.create_task(view.wait_for(command_id, "converged", 5))
    await eventually(lambda: bool(view.commands[command_id].waiters), "the wait registered", timeout_s=5)
    waiting.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert view.commands[command_id].waiters == []
    view.apply(_fact(CommandConverged, command_id, 2))  # nothing left to wake
    assert view.commands[command_id].status == "converged"
