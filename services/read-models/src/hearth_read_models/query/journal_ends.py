"""How far a device's journal went when a read arrived: the mark read-your-writes with ``command_id``
waits for the views to pass (``reads.read_your_writes``).

Why the journal's end and not the command's status in the view: the command API answers a command's
status (``?wait=converged``) from its own fold of the journal, so that status's fact was in the journal
before the caller's next read arrived, but the query API is not told which status the caller was
answered. The device's facts are in one journal partition, in version order, and the projector commits
its consumed offsets in the transaction that writes the views (``consumed_offsets``). So once the views
have consumed that partition up to the end it had when the read arrived, they hold every fact any
answer before the read was made from: the command in at least the status it was reported in, and the
twin as of that status (the Redis cache is written before that commit, so it is never behind it).

One Kafka client per query-API process, assigned to no partition: it only asks the broker for a
partition's end offset (one ListOffsets request per read that names a command). The partition is the
one every Hearth producer's default partitioner gives the device id
(``hearth_shared.adapters.kafka.partition_of``).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from hearth_shared.adapters.kafka import partition_of, topic_partitions


@dataclass(frozen=True, slots=True)
class JournalMark:
    """The journal's end for one device's partition when a read arrived, and whose consumed offsets
    (``consumed_offsets.consumer``) must reach it."""

    consumer: str
    topic: str
    partition: int
    end_offset: int


class JournalEnds:
    """Answers ``mark(device_id)``; started and stopped with the query API (its lifespan)."""

    def __init__(self, bootstrap_servers: str, journal_topic: str, projector_consumer: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = journal_topic
        self.projector_consumer = projector_consumer
        self._consumer: AIOKafkaConsumer | None = None  # made in start(): aiokafka needs a running loop
        self._partitions = 0

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap_servers, client_id="query-api-ends")
        self._consumer = consumer
        await consumer.start()
        self._partitions = len(await topic_partitions(consumer, self.topic))

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()

    async def mark(self, device_id: str) -> JournalMark:
        """The end offset of ``device_id``'s journal partition now (a request to the broker)."""
        if self._consumer is None:
            raise RuntimeError("JournalEnds.start() has not been awaited")
        tp = TopicPartition(self.topic, partition_of(device_id.encode(), self._partitions))
        ends = await self._consumer.end_offsets([tp])
        return JournalMark(self.projector_consumer, self.topic, tp.partition, ends[tp])
