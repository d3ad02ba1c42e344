"""How the live projector commits a batch: in one transaction that first takes the swap lock and checks
the generation, writes the rows and offsets, and publishes to Redis just before it commits.

At least once into Redis, made harmless: the twin cache and the per-home change channels are written in
one MULTI before the PostgreSQL commit; a crash between the two replays the batch, which sets the same
twins again and publishes changes whose versions subscribers have seen (they drop them).

Generations: a rebuild builds a new schema and swaps it in (rebuild/swap.py) while this projector runs. The
live projector takes the swap's advisory lock first in every batch transaction and then reads the
schema's ``meta.generation``; when it is not the one it started from, the batch is dropped and the
projector reloads its positions (and empties its caches) from the schema that is live now.

Should PostgreSQL still refuse a batch for its data (``psycopg.DataError``: a value the storable checks
let through), the batch is projected again record by record, and the record it refuses alone is a dead
letter (``refused_by_postgres``) whose offset is committed without rows: the projector never stops on it.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import psycopg
from redis.asyncio import Redis

from hearth_read_models.projection.journal_source import Records
from hearth_read_models.projection.projector import Projector
from hearth_read_models.projection.rules import Projection
from hearth_read_models.projection.view_meta import read_generation
from hearth_read_models.projection.view_store import Batch
from hearth_read_models.store.db import swap_lock
from hearth_read_models.store.live_channels import CHANGE, change_message, home_channel, twin_key
from hearth_shared.schema.events import MalformedRecord

log = logging.getLogger(__name__)

_json = msgspec.json.Encoder()


class _GenerationChanged(Exception):
    """A swap replaced the live schema since this projector loaded its positions."""


class LiveSink:
    """``redis``: where changes are published (None: nowhere; the views alone)."""

    sole_writer = False
    twin_batch = 1  # every batch writes the twins it changed

    def __init__(self, redis: Redis | None) -> None:
        self.redis = redis
        self.publishes = redis is not None

    async def opened(self, projector: Projector) -> None:
        pass

    async def drain(self) -> None:
        pass

    async def abandon(self) -> None:
        pass

    async def take(self, projector: Projector, records: Records) -> None:
        await self._project(projector, records)

    async def _project(self, projector: Projector, records: Records, *, refused: bool = False) -> None:
        """Project one batch in one transaction (or drop it and reload, if a swap came first).
        ``refused``: write only the batch's offsets (PostgreSQL refused its one record)."""
        conn = projector.store.conn
        try:
            async with conn.transaction():
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", (swap_lock(projector.store.schema),)
                )
                if await read_generation(conn) != projector.generation:
                    raise _GenerationChanged
                if refused:
                    offsets = {tp: rs[-1].offset + 1 for tp, rs in records.items()}
                    batch = Batch(projector.projection(), {}, offsets)
                else:
                    batch = await projector.prepare(records)
                await projector.store.write(batch)
                await self._publish(batch.projection)
        except _GenerationChanged:
            projector.stats.reloads += 1
            await projector.load()
            log.info(
                "projector %s: a swap changed the views; continues from %s",
                projector.name,
                projector.describe(),
            )
            return
        except psycopg.DataError as error:
            projector.forget()
            if refused:
                raise
            await self._project_refused(projector, records, error)
            return
        except BaseException:
            projector.forget()
            raise
        projector.committed(batch)

    async def _project_refused(
        self, projector: Projector, records: Records, error: psycopg.DataError
    ) -> None:
        """PostgreSQL refused the batch: project it record by record; the record it refuses alone is
        a dead letter, and only its offset is committed."""
        if sum(map(len, records.values())) == 1:
            [r] = [r for rs in records.values() for r in rs]
            log.error("PostgreSQL refused %s[%d]@%d: %s", r.topic, r.partition, r.offset, error)
            await projector.dead_letter(r, MalformedRecord("refused_by_postgres", str(error)))
            await self._project(projector, records, refused=True)
            return
        reloads = projector.stats.reloads
        for tp, rs in records.items():
            for r in rs:
                if projector.stats.reloads != reloads:
                    return  # a swap came in between: the positions were reloaded, the rest is read again
                await self._project(projector, {tp: [r]})

    async def _publish(self, p: Projection) -> None:
        if self.redis is None or not p.changes:
            return
        async with self.redis.pipeline(transaction=True) as pipe:
            latest: dict[str, dict[str, Any]] = {}
            for c in p.changes:
                pipe.publish(
                    home_channel(c.home_id), change_message(CHANGE, c.device_id, c.version, c.twin, c.event)
                )
                latest[c.device_id] = c.twin
            for device_id, twin in latest.items():
                pipe.set(twin_key(device_id), _json.encode(twin))
            await pipe.execute()
