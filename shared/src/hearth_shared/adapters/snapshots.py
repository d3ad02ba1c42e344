"""Snapshots of what a part folded from its topics, kept on a compacted Kafka topic, so a restart reads
only what came after the snapshot (``hearth_shared.adapters.topic_follower`` takes and restores them).

A snapshot is the fold's state as bytes (the fold says how: ``Snapshotting``) and the positions it
reflects: per topic and partition, the offset of the first record not yet in it. Both are taken at one
moment between two records, so they agree by construction.

Why a compacted topic (``{prefix}.snapshots``) and not a file or a table: every part already needs Kafka
and nothing else, several processes of one part (command API, query API) share one snapshot name, and a
pod rescheduled onto another node finds its snapshot where it left it. Kafka Streams keeps its state
stores' changelogs the same way.

Layout, all of one name's records in one partition (``partition_of(name)``), so loading reads one
partition only:

* chunks first, keyed ``c/{name}/{snapshot_id}/{i}``: the zlib-compressed state cut into pieces of at
  most ``CHUNK_BYTES`` (the broker's default record limit is 1 MiB);
* then the manifest, keyed ``m/{name}``: snapshot id, chunk count, size, SHA-256, positions, time;
* then tombstones for the previous snapshot's chunks (compaction then removes them).

Several processes may save under one name (the processes of one part fold the same topics alike): each
writes its chunks, then its manifest, so the last manifest in the partition names chunks that stand
before it, whatever the others wrote in between; a process tombstones only a snapshot its own newer
manifest already superseded. Chunks of a save that crashed before its manifest stay until a later
cleanup (they are never read: no manifest names them).

A snapshot counts only once its manifest is on the broker, so a crash between chunks and manifest
leaves the previous one in force. ``load`` reads the partition to its end and returns the last
manifest's snapshot; a missing chunk or a wrong digest is ``SnapshotUnreadable`` (the follower then
folds from the first offset, with a warning: never a crash loop).
"""

from __future__ import annotations

import hashlib
import uuid
import zlib
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from hearth_shared.adapters.kafka import make_producer, partition_of, topic_partitions
from hearth_shared.adapters.topics import PARTITIONS
from hearth_shared.schema.events import utcnow
from hearth_shared.schema.snapshot_format import Positions

CHUNK_BYTES = 512 * 1024


class SnapshotUnreadable(Exception):
    """A snapshot that is there but cannot be used (a chunk missing, a digest wrong, a format unknown)."""


class Manifest(msgspec.Struct, frozen=True):
    name: str
    snapshot_id: str
    taken_at: datetime
    positions: Positions
    chunks: int
    size: int
    sha256: str
    records: int = 0  # how many records the state had folded in all (for status)


@dataclass(frozen=True)
class Snapshot:
    manifest: Manifest
    state: bytes  # as the fold's ``snapshot()`` gave it (decompressed)


class SnapshotStore(Protocol):
    async def load(self, name: str) -> Snapshot | None:
        """The latest snapshot under ``name``, or None if there is none; raises ``SnapshotUnreadable``."""
        ...

    async def save(self, name: str, state: bytes, positions: Positions, records: int) -> Manifest: ...

    async def close(self) -> None: ...


_encode_manifest = msgspec.msgpack.Encoder()
_decode_manifest = msgspec.msgpack.Decoder(Manifest)


def _manifest_key(name: str) -> bytes:
    return f"m/{name}".encode()


def _chunk_key(name: str, snapshot_id: str, index: int) -> bytes:
    return f"c/{name}/{snapshot_id}/{index}".encode()


class KafkaSnapshotStore:
    """``SnapshotStore`` on the compacted ``snapshots`` topic (module docstring)."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self._producer: AIOKafkaProducer | None = None
        self._previous: dict[str, Manifest] = {}  # per name, whose chunks the next save tombstones

    def _partition(self, name: str) -> int:
        return partition_of(name.encode(), PARTITIONS)

    async def load(self, name: str) -> Snapshot | None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            await topic_partitions(consumer, self.topic)
            tp = TopicPartition(self.topic, self._partition(name))
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            manifest_key = _manifest_key(name)
            chunk_prefix = f"c/{name}/".encode()
            manifest: Manifest | None = None
            chunks: dict[str, dict[int, bytes]] = {}
            while await consumer.position(tp) < end:
                for record in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                    key = record.key or b""
                    if key == manifest_key and record.value is not None:
                        superseded = manifest
                        manifest = _decode_manifest.decode(record.value)
                        # The superseded snapshot's chunks are no longer wanted. Others' are kept: several
                        # processes may share a name (every command-API process saves the device book),
                        # so another writer's chunks may stand before this manifest and its own after.
                        if superseded is not None and superseded.snapshot_id != manifest.snapshot_id:
                            chunks.pop(superseded.snapshot_id, None)
                    elif key.startswith(chunk_prefix) and record.value is not None:
                        snapshot_id, _, index = key[len(chunk_prefix) :].decode().rpartition("/")
                        chunks.setdefault(snapshot_id, {})[int(index)] = record.value
        finally:
            await consumer.stop()
        if manifest is None:
            return None
        self._previous[name] = manifest
        return Snapshot(manifest, _assemble(manifest, chunks.get(manifest.snapshot_id, {})))

    async def save(self, name: str, state: bytes, positions: Positions, records: int) -> Manifest:
        producer = await self._started_producer()
        packed = zlib.compress(state, 1)
        snapshot_id = uuid.uuid4().hex
        pieces = [packed[i : i + CHUNK_BYTES] for i in range(0, len(packed), CHUNK_BYTES)] or [b""]
        partition = self._partition(name)
        sent = [
            await producer.send(self.topic, piece, key=_chunk_key(name, snapshot_id, i), partition=partition)
            for i, piece in enumerate(pieces)
        ]
        for future in sent:
            await future
        manifest = Manifest(
            name=name,
            snapshot_id=snapshot_id,
            taken_at=utcnow(),
            positions=positions,
            chunks=len(pieces),
            size=len(state),
            sha256=hashlib.sha256(state).hexdigest(),
            records=records,
        )
        await producer.send_and_wait(
            self.topic, _encode_manifest.encode(manifest), key=_manifest_key(name), partition=partition
        )
        previous = self._previous.get(name)
        self._previous[name] = manifest
        if previous is not None and previous.snapshot_id != snapshot_id:
            for i in range(previous.chunks):
                await producer.send(
                    self.topic, None, key=_chunk_key(name, previous.snapshot_id, i), partition=partition
                )
        return manifest

    async def _started_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            # Chunks up to CHUNK_BYTES each, compressed already; the broker's record limit is 1 MiB.
            self._producer = make_producer(self.bootstrap_servers, "hearth-snapshots")
            await self._producer.start()
        return self._producer

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None


def _assemble(manifest: Manifest, chunks: dict[int, bytes]) -> bytes:
    missing = [i for i in range(manifest.chunks) if i not in chunks]
    if missing:
        raise SnapshotUnreadable(f"snapshot {manifest.snapshot_id} of {manifest.name} lacks chunks {missing}")
    try:
        state = zlib.decompress(b"".join(chunks[i] for i in range(manifest.chunks)))
    except zlib.error as error:
        raise SnapshotUnreadable(f"snapshot {manifest.snapshot_id} of {manifest.name}: {error}") from error
    if len(state) != manifest.size or hashlib.sha256(state).hexdigest() != manifest.sha256:
        raise SnapshotUnreadable(f"snapshot {manifest.snapshot_id} of {manifest.name}: digest differs")
    return state


class MemorySnapshotStore:
    """``SnapshotStore`` in a dict: for unit tests of folds (the chunking is the Kafka store's)."""

    def __init__(self) -> None:
        self.saved: dict[str, Snapshot] = {}

    async def load(self, name: str) -> Snapshot | None:
        return self.saved.get(name)

    async def save(self, name: str, state: bytes, positions: Positions, records: int) -> Manifest:
        manifest = Manifest(
            name=name,
            snapshot_id=uuid.uuid4().hex,
            taken_at=utcnow(),
            positions={topic: dict(p) for topic, p in positions.items()},
            chunks=1,
            size=len(state),
            sha256=hashlib.sha256(state).hexdigest(),
            records=records,
        )
        self.saved[name] = Snapshot(manifest, state)
        return manifest

    async def close(self) -> None:
        return None
