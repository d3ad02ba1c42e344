"""The automations service's whole state as one snapshot: the home view, the scheduler's pending
resumes, the engine's bookkeeping, and the positions of BOTH journals it reflects. Why one snapshot and
what keeps it true: ``hearth_automations.app``.

``ServiceState`` is the fold the journal feed's ``SnapshotPolicy`` saves and restores; the journal feed's
own positions go in the snapshot's manifest, the home-journal feed's (``homes_positions``, read at the
same instant) inside the state, from where the app starts that feed after a restore.

``snapshot`` refuses (``EffectsNotWritten``) while a decision in the state is not on the broker yet: a
flush collected or sending, or a write that failed. Saved then, the snapshot would hold a run that a
crash could still lose, and its trigger, behind the snapshot's positions, would never be read again.
The follower logs the refusal and tries again at a later poll; the app's journal feed settles every
poll's effects before the follower may snapshot, so a refusal is rare (a stop in the middle of a poll).

The format is ``AutomationsSnapshot``, JSON (a zone's offset on a datetime survives), read back across
releases: a new field gets a default; ``SNAPSHOT_FORMAT`` changes only with a reader for the old one.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from hearth_automations.service.engine import Engine, EngineState
from hearth_automations.service.scheduler import Scheduler, SchedulerState
from hearth_shared.domain.home_view import HomesView, HomesViewState
from hearth_shared.schema.snapshot_format import NotNow, Positions, SnapshotCodec

SNAPSHOT_FORMAT = 1


class AutomationsSnapshot(msgspec.Struct, kw_only=True):
    format: int
    homes_positions: dict[str, dict[int, int]]  # the home journal's, when the state was taken
    view: HomesViewState
    scheduler: SchedulerState
    engine: EngineState


class EffectsNotWritten(NotNow):
    """No snapshot now: the state holds a decision that is not on the broker yet."""


_CODEC = SnapshotCodec("automations", AutomationsSnapshot, SNAPSHOT_FORMAT, json=True)


class ServiceState:
    """``Snapshotting`` over the view, the scheduler and the engine together."""

    def __init__(
        self, view: HomesView, scheduler: Scheduler, engine: Engine, homes_positions: Callable[[], Positions]
    ) -> None:
        self.view = view
        self.scheduler = scheduler
        self.engine = engine
        self.homes_positions = homes_positions
        self.restored_homes_positions: Positions = {}  # where the home-journal feed starts

    def snapshot(self) -> bytes:
        why = self.engine.unsettled() or self.scheduler.unsettled()
        if why is not None:
            raise EffectsNotWritten(f"no snapshot now: {why}")
        return _CODEC.encode(
            AutomationsSnapshot(
                format=SNAPSHOT_FORMAT,
                homes_positions=self.homes_positions(),
                view=self.view.state(),
                scheduler=self.scheduler.state(),
                engine=self.engine.state(),
            )
        )

    def restore(self, data: bytes) -> None:
        saved = _CODEC.decode(data)  # raises before anything is replaced
        self.view.load_state(saved.view)
        self.scheduler.load_state(saved.scheduler)
        self.engine.load_state(saved.engine)
        self.restored_homes_positions = saved.homes_positions
