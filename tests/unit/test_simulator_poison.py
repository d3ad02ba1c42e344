"""The simulated gateway's device-command feed with poison on the device-commands topic: every record
it cannot read, or a command whose handling raises, is logged and skipped; later commands are carried out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from hearth_shared.events import AcknowledgeCommand, decode_inbound, encode
from tests.unit.test_simulator_fleet import T0, command, fleet, registered

pytestmark = pytest.mark.unit


@dataclass
class Message:
    offset: int
    value: bytes | None


class Drained(Exception):
    """The fake consumer has nothing more."""


class OneBatch:
    def __init__(self, values: list[bytes | None]) -> None:
        self.batches = [{"tp": [Message(i, v) for i, v in enumerate(values)]}]

    async def getmany(self, **_: Any) -> dict[str, list[Message]]:
        if not self.batches:
            raise Drained
        return self.batches.pop()


async def test_poison_device_commands_are_skipped_and_later_ones_carried_out(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = fleet()
    gateway.clock = lambda: T0  # type: ignore[method-assign]
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
    consumer = OneBatch(
        [b"\xff" + b"x" * 900_000, None, b"[" * 200_000 + b"]" * 200_000, encode(exploding), encode(good)]
    )
    with pytest.raises(Drained):
        await gateway._take_commands(consumer)  # type: ignore[arg-type]
    acks = [decode_inbound(value) for _, _, value in gateway._acks]
    assert [(a.command_id, a.ok) for a in acks if isinstance(a, AcknowledgeCommand)] == [
        (good.command_id, True)
    ]
    assert caplog.text.count("skipping device command") == 3 and "a bug in one command" in caplog.text
