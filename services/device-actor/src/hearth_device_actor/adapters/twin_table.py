"""The twins' faust table (``TwinTable``): device_id (bytes, as the inbox key) -> the twin (msgpack).

Its changelog is partitioned by the same murmur2 key hash as the inbox, so the table stays co-partitioned
with the inbox and the journal: the worker that holds a table partition reads the inbox partition with the
same number. faust assigns the table's partitions among the workers and recovers them after a rebalance;
this table then forgets the twins of partitions it no longer holds and tells the worker which it holds.

Only a recovery of the current assignment counts: faust tells the tables that a recovery completed before
it checks whether another rebalance began meanwhile, so a recovery cut short by a newer assignment also
ends in ``on_recovery_completed``, its twins possibly far behind the changelog. Acting on it, a worker
read inbox partitions that were no longer its own and ticked deadlines of stale twins: in a drill
(2026-11-28) it journaled ``device.went_offline`` at version 15 after the device's version 154. Such a
completion is logged and ignored; the newer assignment's recovery follows and tells again.

The partitions alone do not tell such a completion apart: by the time it is told, faust has already
replaced the recovery's partitions (``actives_for_table``) with the newer assignment's, so they match
the current assignment while their twins were read only partly (a drill of the same day: two workers
recovered a partition to v24 of a device whose changelog held v202, and stopped on the journal gap the
catch-up found). What does tell: the newer rebalance has signalled a recovery start that faust's
recovery loop has not taken up yet (it clears the signal when it starts the next recovery, and a
rebalance is the only thing that sets it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, cast

import faust
from faust.tables.manager import TableManager
from faust.tables.recovery import Recovery
from faust.types import AppT

from hearth_shared.adapters.kafka import partition_of

log = logging.getLogger(__name__)


class TwinTable(faust.Table[bytes, bytes]):
    """The twins table, its changelog partitioned exactly like the inbox: by the device_id key's hash.

    faust would otherwise take the partition of the event being processed, and here there is none: the
    twins are written outside any faust stream, by the inbox feed and the deadline timer. ``on_recovered``
    is told which partitions the table holds whenever a rebalance's recovery is over.
    """

    on_recovered: Callable[[set[int]], Awaitable[None]] | None = None

    def partition_for_key(self, key: bytes) -> int:
        return partition_of(key, self.partitions)

    async def on_recovery_completed(self, active_tps: set[Any], standby_tps: set[Any]) -> None:
        await super().on_recovery_completed(active_tps, standby_tps)
        held = {tp.partition for tp in active_tps}
        assigned = self._assigned_now()
        if held == assigned and not self._newer_recovery_pending():
            self._forget_twins_not_in(held)
            if self.on_recovered is not None:
                await self.on_recovered(held)
            return
        # the end of a recovery a newer assignment cut short (see the module)
        log.warning(
            "twins: a recovery of partitions %s was cut short by a newer rebalance (assigned now: %s); "
            "ignored (the new assignment's recovery follows)",
            sorted(held),
            sorted(assigned),
        )

    def _newer_recovery_pending(self) -> bool:
        """A rebalance after this recovery began has signalled the next one (see the module)."""
        return recovery_of(self.app).signal_recovery_start.is_set()

    def _assigned_now(self) -> set[int]:
        """The changelog partitions faust's assignor gave this worker in the current generation."""
        topic = self.changelog_topic.get_topic_name()
        return {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == topic}

    def _forget_twins_not_in(self, held: set[int]) -> None:
        """Drop the twins of partitions this worker no longer holds, from memory only (no tombstones).

        faust's memory store forgets a lost partition's keys only if it read them from the changelog;
        the twins this worker wrote itself would stay, stale, and the deadline timer would act on them.
        """
        data: MutableMapping[bytes, bytes] = self.data.data  # the memory store's dict
        for key in [k for k in data if partition_of(k, self.partitions) not in held]:
            del data[key]


def recovery_of(app: AppT) -> Recovery:
    """The app's table recovery service (``app.tables`` is typed as the abstract manager)."""
    return cast(TableManager, app.tables).recovery
