"""The simulated hub's command feed: a command whose handling raises is logged and skipped, and later
commands are carried out. (Unreadable command payloads never reach the simulator: the device SDK decodes
each MQTT message with ``hearth_shared.schema.mqtt.decode_command`` and drops what it cannot read.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.waiting import eventually
from tests.unit.test_simulator_fleet import T0, command, fleet, registered

pytestmark = pytest.mark.unit


class FakeHub:
    """What ``Fleet._take_commands`` reads: the commands the hub's connection received, in order."""

    def __init__(self) -> None:
        self.commands: asyncio.Queue[Any] = asyncio.Queue()


async def test_a_command_whose_handling_raises_is_skipped_and_later_ones_carried_out(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = fleet()
    gateway.clock = lambda: T0
    gateway.learn(registered("th-1", "thermostat"), T0)
    exploding, good = (
        command("th-1", "set_hvac_mode", {"mode": "heat"}),
        command("th-1", "set_hvac_mode", {"mode": "cool"}),
    )
    on_command = gateway.on_command

    def fragile(cmd: Any, now: float) -> None:
        if cmd.command_id == exploding.command_id:
            raise RuntimeError("a bug in one command")
        on_command(cmd, now)

    monkeypatch.setattr(gateway, "on_command", fragile)
    hub = FakeHub()
    for cmd in (exploding, good):
        hub.commands.put_nowait(cmd)
    taking = asyncio.create_task(gateway._take_commands(hub))  # type: ignore[arg-type]
    try:
        await eventually(
            lambda: hub.commands.empty() and bool(gateway._acks),
            "both commands taken",
            timeout_s=5,
            every_s=0.01,
        )
    finally:
        taking.cancel()
        await asyncio.gather(taking, return_exceptions=True)
    acks = [ack for _, _, ack in gateway._acks]
    assert [(a.command_id, a.result) for a in acks] == [(good.command_id, "ok")]
    assert "a bug in one command" in caplog.text
