"""Token revocations as journal facts: ``token.revoked`` records on the compacted revocations topic.

A revocation is a fact with its own small envelope (it belongs to no device, so it is not a device
``Event``), keyed by the token id on a compacted one-partition topic: compaction keeps one record per
revoked token for ever, so a process that starts reads every revocation there is. The fact id is derived
from the token id, so revoking twice (from the CLI and the API, or a retry) is the same fact (the record:
``hearth_shared.schema.revocations``).

Every API process follows the topic (``RevocationFeed``: a ``TopicFollower``, as every fold of a topic)
into a ``Revocations`` set that its token check reads on each request and that open websockets look at
every second; a revocation is effective everywhere within about a second of the broker having it. Until a
feed has read the topic to the end offsets seen at its start (a compacted topic whose last records were
removed counts as read once the fetch position is past that end), the API's /healthz answers 503: a token
revoked before a restart must not be good again for the moment after it. A record that cannot be read is
logged and skipped (only the CLI and the admin API write here); the feed goes on.

No snapshot, unlike the journal's folds: the topic is compacted and holds one record per revoked token, so
reading it whole at every start is already bounded by the live state (the revoked tokens), not by
history, and retention never applies to it (compaction keeps each token's record for ever). A snapshot
would be a second copy of the same set.
"""

from __future__ import annotations

import logging

import msgspec
from aiokafka import AIOKafkaProducer

from hearth_shared.adapters.kafka import make_producer
from hearth_shared.adapters.topic_follower import TopicFollower
from hearth_shared.adapters.topics import Topics
from hearth_shared.schema.auth import Revocations
from hearth_shared.schema.revocations import TokenRevoked

log = logging.getLogger(__name__)

POLL_MS = 200  # how long one fetch waits: revocations arrive within this (plus the broker's delay)

_encode = msgspec.json.Encoder()
_decode = msgspec.json.Decoder(TokenRevoked)


async def publish_revocation(producer: AIOKafkaProducer, topics: Topics, fact: TokenRevoked) -> None:
    """Append the fact; returns once the broker has it (the producer's acks=all)."""
    await producer.send_and_wait(topics.token_revocations, _encode.encode(fact), key=fact.token_id.encode())


async def revoke(bootstrap_servers: str, topics: Topics, fact: TokenRevoked) -> None:
    """Append one revocation with a producer of its own (the CLI)."""
    producer = make_producer(bootstrap_servers, "hearth-token-revoke")
    await producer.start()
    try:
        await publish_revocation(producer, topics, fact)
    finally:
        await producer.stop()


class RevocationFeed:
    """Reads the revocations topic from its first offset, then follows it (``TopicFollower``), adding every
    token id to a set.

    ``caught_up`` is set once the topic was read up to the end offsets seen at start-up.
    """

    def __init__(self, bootstrap_servers: str, topics: Topics, revocations: Revocations) -> None:
        self.revocations = revocations
        self._follower = TopicFollower(
            bootstrap_servers, [topics.token_revocations], self._on_record, "revocation-feed", poll_ms=POLL_MS
        )
        self.caught_up = self._follower.caught_up

    async def start(self) -> None:
        await self._follower.start()

    async def stop(self) -> None:
        await self._follower.stop()

    async def _on_record(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        if value is None:
            return  # a tombstone (an operator's clean-up of a long-expired token): nothing to add
        try:
            fact = _decode.decode(value)
        except msgspec.DecodeError as exc:
            log.warning("skipping unreadable revocation at offset %d: %s", offset, exc)
            return
        self.revocations.add(fact.token_id)
