"""Device facts made by the real domain (``decide``, ``stamp``, ``evolve``), as the device actor records
them: for tests of folds of the journal (the campaign driver's fleet view and its snapshots) that write
the facts themselves rather than run the actor."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from hearth_shared.domain import decide, evolve, stamp
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import AnomalyDetected, AnomalyDetectedPayload, Event, Inbound


class DeviceJournal:
    """The facts of one home's devices, in the order a journal holds them, on a clock of its own."""

    def __init__(self, *, start: datetime, home_id: str = "h1") -> None:
        self.now = start
        self.home_id = home_id
        self.twins: dict[str, Twin | None] = {}
        self.facts: list[Event] = []
        self._taken = 0

    def send(self, device_id: str, request: Inbound, after_s: float = 1.0) -> list[Event]:
        """``request`` decided ``after_s`` after the previous one; the facts it made."""
        self.now += timedelta(seconds=after_s)
        twin = self.twins.get(device_id)
        events = stamp(
            twin,
            decide(twin, request, self.now),
            home_id=self.home_id,
            device_id=device_id,
            now=self.now,
            causation_id=None,
        )
        for event in events:
            twin = evolve(twin, event)
        self.twins[device_id] = twin
        self.facts += events
        return events

    def anomaly(self, device_id: str) -> None:
        """An ``anomaly.detected`` fact (the actor's scoring, which needs a model, left out)."""
        self.now += timedelta(seconds=1)
        twin = self.twins.get(device_id)
        payload = AnomalyDetectedPayload(
            metric="ambient_c", value=40.0, score=9.0, threshold=4.0, model_version=1, device_time=self.now
        )
        fact = AnomalyDetected(
            event_id=uuid.uuid4(),
            device_id=device_id,
            home_id=self.home_id,
            version=(twin.version if twin else 0) + 1,
            occurred_at=self.now,
            recorded_at=self.now,
            payload=payload,
        )
        self.twins[device_id] = evolve(twin, fact)
        self.facts.append(fact)

    def take(self) -> list[Event]:
        """The facts made since the last ``take``."""
        taken, self._taken = self.facts[self._taken :], len(self.facts)
        return taken
