"""Fakes for the seams the code offers, shared by the unit tests: the device actors' ``Outbox`` and a
clock that stands still until a test moves it."""

from __future__ import annotations

from datetime import datetime

from hearth_device_actor.actor import InboxRecord
from hearth_shared.events import DeviceCommand, Event, MalformedRecord


class FakeOutbox:
    """Records what the actors send and dead-letter; ``fail`` makes ``send`` raise (a broker gone)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.commands: list[DeviceCommand] = []
        self.dead: list[tuple[InboxRecord, Exception]] = []
        self.fail = False

    async def send(self, events: list[Event], commands: list[DeviceCommand]) -> None:
        if self.fail:
            raise ConnectionError("broker unreachable")
        self.events += events
        self.commands += commands

    async def dead_letter(self, record: InboxRecord, error: Exception) -> None:
        self.dead.append((record, error))

    @property
    def letters(self) -> list[tuple[int, str]]:
        """(offset, reason) of each dead letter."""
        return [
            (r.offset, e.reason if isinstance(e, MalformedRecord) else type(e).__name__) for r, e in self.dead
        ]


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now
