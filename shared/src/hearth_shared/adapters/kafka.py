"""Kafka adapters every service uses: topic creation, the journal/inbox producer, dead letters.

Producers use acks=all and idempotence, so a retried send never writes a record twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import (
    InvalidProducerEpoch,
    OutOfOrderSequenceNumber,
    TopicAlreadyExistsError,
    UnknownProducerId,
)
from aiokafka.partitioner import murmur2
from aiokafka.protocol.metadata import MetadataRequest

from hearth_shared.adapters.topics import PARTITIONS, Topics, TopicSpec
from hearth_shared.schema.events import DeadLetter, Event, Inbound, MalformedRecord, encode, utcnow

log = logging.getLogger(__name__)

# Produce errors that leave an idempotent producer's sequence for a partition out of step with the
# broker's for good (after a leader change lost the producer's state, or a batch the broker took was
# reported failed): aiokafka neither retries them nor starts a new producer id, as the Java client does
# (KIP-360), so every later send to that partition fails the same way until the producer is replaced.
SEQUENCE_LOST = (OutOfOrderSequenceNumber, UnknownProducerId, InvalidProducerEpoch)

# A write through ``KafkaWriter.produce`` that took this long until the broker had it is counted as slow,
# and the slow ones are logged (at most once per ``SLOW_WRITES_LOG_EVERY_S``, with their count and the
# slowest): a caller that waited long (a command API's 202) then says whether Kafka made it wait.
SLOW_WRITE_S = 2.0
SLOW_WRITES_LOG_EVERY_S = 10.0

PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable_idempotence": True,
    "linger_ms": 2,
    "max_batch_size": 256 * 1024,
    "request_timeout_ms": 30_000,
}


async def wait_until_every_broker_knows(
    bootstrap_servers: str, topics: Collection[str], *, timeout_s: float = 60.0
) -> None:
    """Until every broker's metadata lists ``topics``, each partition with a leader; raises TimeoutError.

    A new topic reaches the other brokers' metadata a moment after the controller created it. A consumer
    group joined in that moment is assigned none of its partitions, and faust (0.15.3) then ignores the
    topic as missing for good: a device-actor worker in a cluster once owned no partition at all.
    """
    client = AIOKafkaClient(bootstrap_servers=bootstrap_servers)
    await client.bootstrap()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    try:
        while True:
            unknown = {
                f"{topic} on broker {broker.nodeId}"
                for broker in client.cluster.brokers()
                for topic in _unknown_topics(
                    await client.send(broker.nodeId, MetadataRequest(list(topics), False)), topics
                )
            }
            if not unknown:
                return
            if loop.time() > deadline:
                raise TimeoutError(f"not known after {timeout_s:g} s: {', '.join(sorted(unknown))}")
            await asyncio.sleep(0.1)
    finally:
        await client.close()


def _unknown_topics(response: Any, topics: Collection[str]) -> set[str]:
    """The ``topics`` a metadata response lacks, or lists with an error or a partition without leader.
    (Each topic is a tuple: error code, name, ..., partitions; each partition: error, index, leader...)"""
    known = {
        entry[1]
        for entry in response.topics
        if entry[0] == 0 and entry[-1] and all(partition[2] >= 0 for partition in entry[-1])
    }
    return set(topics) - known


async def ensure_topics(bootstrap_servers: str, specs: Collection[TopicSpec]) -> None:
    """Create the topics that do not exist yet, with their partition counts, replicas and configs, and
    return once every broker knows all of them (``wait_until_every_broker_knows`` says why).

    A topic that exists already is left as it is (its replication factor is not changed here).
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=30_000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [
            NewTopic(
                name=s.name,
                num_partitions=s.partitions,
                replication_factor=s.replication_factor,
                topic_configs=s.config,
            )
            for s in specs
            if s.name not in existing
        ]
        if new:
            with contextlib.suppress(TopicAlreadyExistsError):
                response = await admin.create_topics(new)
                _raise_topic_errors(response.topic_errors)
    finally:
        await admin.close()
    await wait_until_every_broker_knows(bootstrap_servers, [s.name for s in specs])


async def apply_topic_config(bootstrap_servers: str, spec: TopicSpec) -> None:
    """Set an existing topic's configs to exactly ``spec.config`` (e.g. a changed journal retention).

    Kafka's AlterConfigs replaces a topic's whole set of dynamic configs, so the spec's full config is
    sent (what ``ensure_topics`` would create it with), never one key alone.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=30_000)
    await admin.start()
    try:
        responses = await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, spec.name, spec.config)]
        )
        for response in responses:
            for error_code, message, *_ in response.resources:
                if error_code:
                    raise RuntimeError(f"Kafka refused the configs of {spec.name}: {error_code} {message}")
    finally:
        await admin.close()


def _raise_topic_errors(topic_errors: Iterable[Any]) -> None:
    """CreateTopics answers per topic; aiokafka returns the codes rather than raising them. A topic that
    another client created meanwhile is fine; anything else (e.g. more replicas than live brokers) is not."""
    failed = [
        f"{name}: {error_code} {rest[0] if rest and rest[0] else ''}".strip()
        for name, error_code, *rest in topic_errors
        if error_code not in (0, TopicAlreadyExistsError.errno)
    ]
    if failed:
        raise RuntimeError(f"Kafka refused to create topics: {'; '.join(failed)}")


async def topic_partitions(
    consumer: AIOKafkaConsumer, topic: str, timeout_s: float = 10.0
) -> list[TopicPartition]:
    """The partitions of ``topic``, once the consumer's metadata knows them (fails if it never does)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not (partitions := consumer.partitions_for_topic(topic)):
        if loop.time() > deadline:
            raise RuntimeError(f"topic {topic!r} does not exist (run `hearth init` first)")
        await consumer._client.force_metadata_update()
        await asyncio.sleep(0.05)
    return [TopicPartition(topic, p) for p in sorted(partitions)]


# A fetch that finds less than this waits at the broker (up to the consumer's wait) for more.
FOLLOWER_FETCH_MIN_BYTES = 1024 * 1024


def held_fetches(wait_ms: int) -> dict[str, int]:
    """Consumer settings for a follower that may see a record up to ``wait_ms`` late: the broker holds
    each fetch until ``FOLLOWER_FETCH_MIN_BYTES`` are there or ``wait_ms`` passed.

    With Kafka's defaults (one byte, 500 ms) a fetch comes back at the first record, so every consumer
    of a topic sent a fetch, and the broker and the consumer each woke once, per write to it: on the
    command path (a few journal writes per command) that was a large share of the broker's CPU. Held,
    a trickle costs at most one fetch per ``wait_ms``; a backlog still comes back at once.

    The price: an idle held consumer fetches once per ``wait_ms`` (Kafka's default: once per 500 ms),
    and each expiry is work for the broker. So only followers that can wait 100 ms or more hold theirs
    (broker access, the simulator). Measured (client-side request counts, 100 commands/s): holding the
    device actor's inbox fetches for 5 ms and the projector's for 10 ms doubled the idle request rate
    (171 -> 342 requests/s) and saved nothing at that rate, so the hot path does not hold. ``wait_ms``
    0: not held (a fetch comes back at the first record).
    """
    if wait_ms <= 0:
        return {}
    return {"fetch_max_wait_ms": wait_ms, "fetch_min_bytes": FOLLOWER_FETCH_MIN_BYTES}


@functools.lru_cache(maxsize=1 << 16)
def partition_of(key: bytes, partitions: int = PARTITIONS) -> int:
    """The partition Kafka's default partitioner (murmur2, as every Hearth producer uses) gives a key.

    aiokafka's murmur2 is pure Python; device ids repeat, so the answers are cached.
    """
    return int(murmur2(key) & 0x7FFFFFFF) % partitions


async def send_batched(
    producer: AIOKafkaProducer, topic: str, records: Iterable[tuple[bytes, bytes]]
) -> list[asyncio.Future[Any]]:
    """Queue keyed records as one record batch per partition, in order; returns the batches' futures.

    Far cheaper than a ``send()`` per record (no future and no accumulator call per record); the
    partition is the one ``send()`` would pick for the key (topics have ``PARTITIONS`` partitions).
    """
    open_batches: dict[int, Any] = {}
    futures: list[asyncio.Future[Any]] = []
    for key, value in records:
        partition = partition_of(key)
        batch = open_batches.get(partition)
        if batch is None:
            batch = open_batches[partition] = producer.create_batch()
        if batch.append(key=key, value=value, timestamp=None) is None:  # full: send it, start another
            futures.append(await producer.send_batch(batch, topic, partition=partition))
            batch = open_batches[partition] = producer.create_batch()
            batch.append(key=key, value=value, timestamp=None)
    for partition, batch in open_batches.items():
        futures.append(await producer.send_batch(batch, topic, partition=partition))
    return futures


def make_producer(bootstrap_servers: str, client_id: str, **overrides: Any) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, client_id=client_id, **{**PRODUCER_SETTINGS, **overrides}
    )


class KafkaWriter:
    """One idempotent producer for a part's writes, keyed by device_id: ``append`` puts facts on the
    journal (only the device actor does: it is the journal's single writer), ``send_requests`` puts
    requests on the inbox (the command API, the gateways, automations, campaigns); ``producer`` serves
    the part's other topics (dead letters, home facts, revocations...)."""

    def __init__(
        self, bootstrap_servers: str, topics: Topics, client_id: str, *, linger_ms: int | None = None
    ) -> None:
        """``linger_ms``: the producer's own linger (``PRODUCER_SETTINGS`` unless given). A writer that
        queues a whole batch at once with ``send_batched`` and then waits for it (the device actor) wants
        0: nothing more can join the batch, so a linger only delays it; the batches it queued go out
        together in one produce request at the writer's next await."""
        self.topics = topics
        self.bootstrap_servers = bootstrap_servers
        self.client_id = client_id
        self.overrides: dict[str, Any] = {} if linger_ms is None else {"linger_ms": linger_ms}
        self._producer: AIOKafkaProducer | None = None
        self._renewing = asyncio.Lock()
        self._retired: set[asyncio.Task[None]] = set()  # replaced producers, stopping
        self.renewed = 0  # producers replaced after SEQUENCE_LOST
        self.slow_writes = 0  # writes that took SLOW_WRITE_S or more
        self._slow_unlogged = 0  # slow writes since the last log line, and the slowest of them
        self._slowest_unlogged_s = 0.0
        self._slow_logged_at = 0.0

    @property
    def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("KafkaWriter.start() has not been awaited")
        return self._producer

    async def start(self) -> None:
        # needs a running loop
        self._producer = make_producer(self.bootstrap_servers, self.client_id, **self.overrides)
        await self._producer.start()

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
        await asyncio.gather(*self._retired, return_exceptions=True)

    async def append(self, *events: Event) -> None:
        """Append facts; returns once the broker has them (acks=all)."""
        futures = [
            await self.producer.send(self.topics.journal, encode(e), key=e.device_id.encode()) for e in events
        ]
        await asyncio.gather(*futures)

    async def send_requests(self, *requests: Inbound) -> None:
        """Put requests on the inbox, each on its lane (``Topics.lane_of``); returns once the broker has
        them (raises if one failed)."""

        async def send(producer: AIOKafkaProducer) -> None:
            futures = [
                await producer.send(self.topics.lane_of(r), encode(r), key=r.device_id.encode())
                for r in requests
            ]
            await asyncio.gather(*futures)

        await self.produce(send)

    async def produce(self, send: Callable[[AIOKafkaProducer], Awaitable[None]]) -> None:
        """``send(producer)`` with the writer's producer, which is replaced if the send fails with
        ``SEQUENCE_LOST`` (the send still fails: its caller says so, and a retry goes through the new one)."""
        producer = self.producer
        started = time.monotonic()
        try:
            await send(producer)
        except SEQUENCE_LOST as error:
            await self._renew(producer, error)
            raise
        finally:
            self._timed(time.monotonic() - started)

    def _timed(self, took_s: float) -> None:
        if took_s < SLOW_WRITE_S:
            return
        self.slow_writes += 1
        self._slow_unlogged += 1
        self._slowest_unlogged_s = max(self._slowest_unlogged_s, took_s)
        now = time.monotonic()
        if now - self._slow_logged_at >= SLOW_WRITES_LOG_EVERY_S:
            log.warning(
                "%s: %d writes to Kafka took %g s or more since the last such line (the slowest %.1f s)",
                self.client_id, self._slow_unlogged, SLOW_WRITE_S, self._slowest_unlogged_s,
            )  # fmt: skip
            self._slow_unlogged, self._slowest_unlogged_s = 0, 0.0
            self._slow_logged_at = now

    async def _renew(self, failed: AIOKafkaProducer, error: Exception) -> None:
        """Replace ``failed`` (``SEQUENCE_LOST``) with a new producer, a new producer id: the caller's
        send failed and says so (the command API answers 503, and the client's retry with its key goes
        through the new one). A request sent twice that way is harmless: requests carry their own ids
        (a command's id, a report's seq), and the actor decides each once."""
        retired: AIOKafkaProducer = failed  # (mypy narrows ``failed`` by the test below)
        async with self._renewing:
            if self._producer is not failed:
                return  # a concurrent send renewed it already
            fresh = make_producer(self.bootstrap_servers, self.client_id, **self.overrides)
            await fresh.start()
            self._producer = fresh
            self.renewed += 1
        log.warning(
            "%s: a new Kafka producer after %r (the old one's sequence was lost)", self.client_id, error
        )
        stopping = asyncio.create_task(retired.stop())
        self._retired.add(stopping)
        stopping.add_done_callback(self._retired.discard)


# What a dead letter may carry of the record it reports. Far below the producer's maximum request size
# (aiokafka's ``max_request_size``, 1 MiB by default): text made from arbitrary bytes can grow when
# encoded (a replaced byte is 3 bytes of UTF-8, a control character 6 bytes of JSON escape), so even the
# worst excerpt, with its key and detail, stays under ``MAX_DEAD_LETTER_BYTES``.
VALUE_EXCERPT_BYTES = 16 * 1024
KEY_EXCERPT_BYTES = 512
DETAIL_CHARS = 2000
MAX_DEAD_LETTER_BYTES = 256 * 1024


def excerpt(data: bytes, limit: int) -> tuple[str, bool]:
    """The first ``limit`` bytes of ``data`` as text (undecodable bytes replaced), and whether it was cut."""
    return data[:limit].decode(errors="replace"), len(data) > limit


def dead_letter(
    *,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    error: Exception,
    consumer: str,
) -> DeadLetter:
    """The dead letter for a record: where it came from, why, and a bounded excerpt of its value."""
    if isinstance(error, MalformedRecord):
        reason, detail = error.reason, error.detail
    else:
        reason, detail = type(error).__name__, str(error)
    text, truncated = excerpt(value or b"", VALUE_EXCERPT_BYTES)
    return DeadLetter(
        source_topic=topic,
        partition=partition,
        offset=offset,
        key=excerpt(key, KEY_EXCERPT_BYTES)[0] if key is not None else None,
        reason=reason,
        detail=detail[:DETAIL_CHARS],
        consumer=consumer,
        value=text,
        failed_at=utcnow(),
        value_size=len(value) if value is not None else -1,
        value_truncated=truncated,
    )


class DeadLetters:
    """Sends records nobody could read to the dead-letter topic with the reason, and counts them.

    ``send`` never raises (but for cancellation): a consumer goes on after a record it cannot read
    whether or not its dead letter could be sent; a letter that could not be sent is logged with its
    reason and counted in ``failed``.
    """

    def __init__(self, journal: KafkaWriter, consumer: str) -> None:
        self.journal = journal
        self.topic = journal.topics.dead_letters
        self.consumer = consumer
        self.count = 0
        self.failed = 0

    async def send(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        error: Exception,
    ) -> None:
        letter = dead_letter(
            topic=topic, partition=partition, offset=offset, key=key, value=value, error=error,
            consumer=self.consumer,
        )  # fmt: skip
        self.count += 1
        log.warning(
            "dead letter from %s[%d]@%d: %s %s", topic, partition, offset, letter.reason, letter.detail[:200]
        )
        try:
            data = msgspec.json.encode(letter)
            if len(data) > MAX_DEAD_LETTER_BYTES:  # cannot happen with the excerpt limits; never send more
                data = msgspec.json.encode(msgspec.structs.replace(letter, value="", value_truncated=True))
            letter_key = letter.key.encode() if letter.key is not None else None
            await self.journal.producer.send_and_wait(self.topic, data, key=letter_key)
        except Exception:
            self.failed += 1
            log.exception(
                "could not send the dead letter of %s[%d]@%d (%s); the record is skipped",
                topic, partition, offset, letter.reason,
            )  # fmt: skip
